import { describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../../support/host.js";
import { hostTeardown } from "../../support/host-teardown.js";
import { connect, createSession, sessionUpload } from "./mux-fixture.js";

const { peers, keep } = hostTeardown<TestHost>();

/**
 * A `bad_request` of a mux call or stream names the field as a pointer into its params (§4, §7),
 * whether the schema refused the value or the host found it wrong later (a cursor it never
 * issued, an offset past the attachment): a client maps `data.field` back to one input either way.
 */
describe("bad_request found after the schema names its field as the schema does (protocol-v1 §7)", () => {
  it("session.list's forged `before`, session.download's `offset` past the size, fork's `atSeq` past the head", async () => {
    const host = keep(await startTestHost());
    const peer = await connect(host);
    peers.push(peer);
    const sessionId = await createSession(peer);

    const schemaBefore = await peer.callError("session.list", { before: "c".repeat(513) });
    const forgedBefore = await peer.callError("session.list", { before: "not-a-cursor" });
    expect(schemaBefore.data).toEqual({ field: "/before" });
    expect(forgedBefore.code).toBe("bad_request");
    expect(forgedBefore.data).toEqual({ field: "/before" });

    const attachmentId = await sessionUpload(host, peer, sessionId, new Uint8Array(10));
    const negative = peer.open("session.download", { sessionId, attachmentId, offset: -1 });
    const pastSize = peer.open("session.download", { sessionId, attachmentId, offset: 11 });
    expect((await peer.waitTerminal(negative)).error).toMatchObject({
      code: "bad_request",
      data: { field: "/offset" },
    });
    expect((await peer.waitTerminal(pastSize)).error).toMatchObject({
      code: "bad_request",
      data: { field: "/offset", size: 10 },
    });

    const pastHead = await peer.callError("session.fork", { sourceId: sessionId, atSeq: 1_000 });
    expect(pastHead.data).toMatchObject({ field: "/atSeq" });
  });
});
