import type { HostStore } from "../../../src/store/live-state-store.js";
import { asyncStore } from "../../support/async-store.js";
import { startTestHost } from "../../support/host.js";
import { withMembers } from "../../support/with-members.js";

/**
 * A test host in a process of its own, for tests whose failure would be the host's event loop no
 * longer turning: the test process stays free to notice and report it. Its store answers as a
 * networked one does (reads take timer turns), and it says on stdout when an attachment's body
 * was opened. Argument: the mux options, as JSON. Prints `ready <json>` once it listens.
 */
const mux = JSON.parse(process.argv[2] ?? "{}") as Record<string, unknown>;
let opened = 0;
const host = await startTestHost({
  mux,
  storeView: (store: HostStore) => {
    const slow = asyncStore(store).store;
    return withMembers(slow, {
      attachmentInfo: async (attachmentId: string) => {
        const found = await slow.attachmentInfo(attachmentId);
        process.stdout.write(`attachment opened ${++opened}\n`);
        return found;
      },
    });
  },
});
const attachmentId = await host.store.putAttachment({
  owner: "admin",
  name: "big.bin",
  type: "application/octet-stream",
  bytes: new Uint8Array(Number(process.env.ATTACHMENT_BYTES ?? 16 * 1024 * 1024)).fill(7),
});
process.stdout.write(`ready ${JSON.stringify({ wsUrl: host.wsUrl, attachmentId })}\n`);
// SIGTERM removes the host's folder; a host that no longer turns its event loop is killed instead
process.once("SIGTERM", () => {
  void host.dispose().finally(() => process.exit(0));
});
