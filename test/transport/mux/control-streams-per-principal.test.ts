import { afterEach, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, ALICE_TOKEN, BOB_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { until } from "../../support/until.js";
import { connect } from "./mux-fixture.js";

const MAX = 3;

let host: TestHost | undefined;
afterEach(async () => {
  await host?.dispose();
  host = undefined;
});

/** Opens a control stream and waits for its baseline (an item) or its refusal. */
async function openControl(
  peer: MuxPeer,
): Promise<{ id: number; refusal?: { code: string; data?: unknown } }> {
  const id = peer.open("session.control", {});
  await until(() => peer.of(id).length > 0, 10_000, `baseline or refusal of ${id}`);
  const terminal = peer.terminal(id);
  if (terminal?.type === "error") return { id, refusal: terminal.error as { code: string; data?: unknown } };
  return { id };
}

describe("session.control streams per principal, across its sockets (protocol-v1 §7)", () => {
  it("one past the bound is too_many_streams naming it; closing one makes room; others are counted apart", async () => {
    host = await startTestHost({ principals: { maxControlStreamsPerPrincipal: MAX } });
    const first = await connect(host, { token: ALICE_TOKEN });
    const second = await connect(host, { token: ALICE_TOKEN });
    const open = [await openControl(first), await openControl(first), await openControl(second)];
    for (const stream of open) expect(stream.refusal).toBeUndefined();

    const refused = await openControl(second);
    expect(refused.refusal).toMatchObject({
      code: "too_many_streams",
      data: { limit: "control_streams_per_principal", max: MAX },
    });
    // the socket and its other streams go on: a follow is not counted
    const sessionId = (await second.call<{ header: { sessionId: string } }>("session.create", {})).header
      .sessionId;
    const follow = second.follow(sessionId);
    await until(() => second.of(follow).length > 0, 10_000, "follow's first frame");
    expect(second.terminal(follow)).toBeUndefined();

    // bob and the admin are not counted with alice
    const bob = await connect(host, { token: BOB_TOKEN });
    const admin = await connect(host, { token: ADMIN_TOKEN });
    for (let i = 0; i <= MAX; i++) {
      expect((await openControl(bob)).refusal?.code).toBe(i < MAX ? undefined : "too_many_streams");
      expect((await openControl(admin)).refusal).toBeUndefined();
    }

    // a closed stream, and every stream of a closed socket, gives its place back
    first.close(open[0]!.id);
    await first.waitTerminal(open[0]!.id);
    expect((await openControl(second)).refusal).toBeUndefined();
    expect((await openControl(second)).refusal?.code).toBe("too_many_streams");
    first.ws.close();
    await first.closed;
    // the host frees the socket's streams once it hears the close: until then each try is refused
    await expect.poll(async () => (await openControl(second)).refusal).toBeUndefined();
    expect((await openControl(second)).refusal?.code).toBe("too_many_streams");
  });
});
