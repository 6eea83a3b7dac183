import { afterEach, expect, test, vi } from "vitest";
import { ADMIN } from "../../src/host/principal.js";
import { gate } from "../support/gate.js";
import { demoAgentWith, type HostFixture, openHost, readLog } from "./host-fixture.js";

/**
 * A prompt queued behind a long turn (one parked on a person may wait for hours) names an upload:
 * the uploads sweeper deletes uploads no prompt references once their time is up (an hour by
 * default), and a queued prompt references it.
 */

let fx: HostFixture;
afterEach(async () => fx?.dispose());

test("a queued prompt's upload outlives the upload time while it waits: it starts with its file, and the prompt behind it after", async () => {
  const held = gate();
  const ran: { text: string; files: number[] }[] = [];
  const agent = demoAgentWith("held", async (turn) => {
    ran.push({
      text: turn.prompt.text,
      files: turn.prompt.attachments.map((a) => a.bytes?.byteLength ?? -1),
    });
    if (turn.prompt.text === "long") await held.promise;
    return { state: "completed" };
  });
  fx = await openHost({ agent });
  await fx.host.call(ADMIN, "session.create", { sessionId: "s1" });
  const upload = await fx.host.putAttachment(ADMIN, {
    name: "f.txt",
    type: "text/plain",
    bytes: new Uint8Array(10),
  });
  const send = (text: string, attachmentId?: string) =>
    fx.host.call(ADMIN, "session.prompt", {
      sessionId: "s1",
      text,
      clientMessageId: text.replace(" ", "-"),
      ...(attachmentId ? { attachments: [{ name: "f.txt", type: "text/plain", attachmentId }] } : {}),
    });
  expect(await send("long")).toMatchObject({ queued: false });
  expect(await send("with file", upload)).toMatchObject({ queued: true });
  expect(await send("after")).toMatchObject({ queued: true });
  // the sweep as if the upload time had run out while they waited
  await fx.store.attachmentSweeper().sweep(Date.now() + 1);
  held.open();
  // before, the upload was swept: "with file" failed attachment_not_found at every try (the
  // queue's head for good), and "after" never ran
  await vi.waitFor(
    async () => expect((await readLog(fx.store, "s1")).filter((e) => e.type === "turn/end")).toHaveLength(3),
    { timeout: 10_000, interval: 20 },
  );
  expect(ran).toEqual([
    { text: "long", files: [] },
    { text: "with file", files: [10] },
    { text: "after", files: [] },
  ]);
});
