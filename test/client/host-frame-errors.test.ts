import type { Subscription } from "rxjs";
import { describe, expect, it, vi } from "vitest";
import { encodeFrame } from "../../protocol/codec.js";
import type { SessionmuxError } from "../../protocol/index.js";
import { followSession } from "../../src/client/follow-session.js";
import { createNodeClient, type SessionmuxClient } from "../../src/client/node.js";
import { RemoteError } from "../../src/client/remote-errors.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { startFakePeer } from "./fake-peer.js";

const cleanups = cleanupsAfterEach();

/** A peer whose answers are broken on purpose, per method. */
async function brokenPeer() {
  const p = await startFakePeer({
    onCall: (conn, f) => {
      if (f.method === "session.list") conn.send({ type: "result", id: f.id }); // no `value`
      if (f.method === "session.page") {
        conn.send({ type: "error", id: f.id, error: { code: "session_not_found", message: 5 } });
      }
      if (f.method === "session.models") return { models: [], default: "d" };
      return undefined;
    },
  });
  cleanups.push(() => p.stop());
  return p;
}
function client(url: string, reports: SessionmuxError[]): SessionmuxClient {
  const c = createNodeClient({ url, token: "t", onError: (e) => reports.push(e) });
  cleanups.push(() => c.close());
  return c;
}

describe("host frames the client cannot read are answered and reported, never dropped", () => {
  it("an invalid result answers its call with invalid_host_frame and is reported", async () => {
    const p = await brokenPeer();
    const reports: SessionmuxError[] = [];
    const c = client(p.url, reports);
    const error = await c.list().catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "invalid_host_frame", data: { id: 1 } });
    expect(reports.map((r) => r.code)).toEqual(["invalid_host_frame"]);
  });

  it("an error frame with a malformed error value answers its call too", async () => {
    const p = await brokenPeer();
    const reports: SessionmuxError[] = [];
    const c = client(p.url, reports);
    await expect(c.page({ sessionId: "s" })).rejects.toMatchObject({ code: "invalid_host_frame" });
    expect(reports).toHaveLength(1);
  });

  it("undecodable bytes, a text frame and an error frame without id are reported; the socket stays usable", async () => {
    const p = await brokenPeer();
    const reports: SessionmuxError[] = [];
    const c = client(p.url, reports);
    const seen: SessionmuxError[] = [];
    const sub = c.errors$.subscribe((e) => seen.push(e));
    cleanups.push(() => sub.unsubscribe());
    await vi.waitFor(() => expect(c.state.name).toBe("open"));
    const conn = p.connections[0]!;
    conn.socket.send(Buffer.from([0xc1]));
    conn.socket.send("not binary");
    conn.send({
      type: "error",
      error: { code: "bad_frame", message: "what", category: "protocol", retryable: false },
    });
    // an unreadable answer to a call the client never made (or gave up on)
    conn.send({ type: "result", id: 4_242 });
    await vi.waitFor(() => expect(reports).toHaveLength(4));
    expect(reports.map((r) => r.code)).toEqual([
      "invalid_host_frame",
      "invalid_host_frame",
      "bad_frame",
      "invalid_host_frame",
    ]);
    expect(reports[2]).toBeInstanceOf(RemoteError);
    expect(seen.map((r) => r.code)).toEqual(reports.map((r) => r.code));
    await expect(c.call("session.models", {})).resolves.toEqual({ models: [], default: "d" });
  });

  it("each report says what was unreadable and names the frame id only when the frame carries a valid one", async () => {
    const p = await brokenPeer();
    const reports: SessionmuxError[] = [];
    const c = client(p.url, reports);
    await vi.waitFor(() => expect(c.state.name).toBe("open"));
    const conn = p.connections[0]!;
    conn.socket.send(Buffer.from([0xc1]));
    conn.socket.send("not binary");
    conn.socket.send(encodeFrame(null));
    conn.send({ type: 7, id: 4_242 });
    conn.send({ type: "result", id: 0 });
    conn.send({ type: "end", id: -3 });
    conn.send({ type: "item", id: 1.5 });
    await vi.waitFor(() => expect(reports).toHaveLength(7));
    expect(reports.map((r) => [r.code, r.message, r.data])).toEqual([
      ["invalid_host_frame", "the host sent an undecodable frame; the client cannot read it", undefined],
      [
        "invalid_host_frame",
        "the host sent a text frame (v1 frames are binary); the client cannot read it",
        undefined,
      ],
      ["invalid_host_frame", "the host sent an invalid frame; the client cannot read it", undefined],
      ["invalid_host_frame", "the host sent an invalid frame; the client cannot read it", { id: 4_242 }],
      ["invalid_host_frame", 'the host sent an invalid "result" frame; the client cannot read it', undefined],
      ["invalid_host_frame", 'the host sent an invalid "end" frame; the client cannot read it', undefined],
      ["invalid_host_frame", 'the host sent an invalid "item" frame; the client cannot read it', undefined],
    ]);
    // The decoder's own complaint stays reachable for whoever debugs the host.
    expect(reports[0]!.cause).toMatchObject({ code: "bad_frame" });
    await expect(c.call("session.models", {})).resolves.toEqual({ models: [], default: "d" });
  });

  it("an invalid stream item ends the stream with invalid_host_frame instead of leaving it open", async () => {
    const p = await startFakePeer({
      onOpen: (conn, f) => conn.send({ type: "item", id: f.id }), // no `value`
    });
    cleanups.push(() => p.stop());
    const reports: SessionmuxError[] = [];
    const c = client(p.url, reports);
    let failure: unknown;
    const sub: Subscription = followSession(c, "s").subscribe({ error: (e: unknown) => (failure = e) });
    cleanups.push(() => sub.unsubscribe());
    await vi.waitFor(() => expect(failure).toMatchObject({ code: "invalid_host_frame" }));
    expect(reports.map((r) => r.code)).toEqual(["invalid_host_frame"]);
  });
});

describe("the client reads every host message that carries a value it can decode", () => {
  const MIB = 1024 * 1024;

  it("a result holding a 16 MiB binary, the largest the client decodes, arrives whole; one byte more is reported", async () => {
    const largest = new Uint8Array(16 * MIB).map((_, i) => (i * 31) % 251);
    const p = await startFakePeer({
      // Only the first socket answers big: a client that dropped it would get the small answer.
      onCall: (conn) => (conn === p.connections[0] ? { blob: largest } : { blob: new Uint8Array(1) }),
    });
    cleanups.push(() => p.stop());
    const reports: SessionmuxError[] = [];
    const c = client(p.url, reports);
    const answer = (await c.call("session.models", {})) as unknown as { blob: Uint8Array };
    expect(answer.blob.byteLength).toBe(16 * MIB);
    expect(Buffer.from(answer.blob).equals(Buffer.from(largest))).toBe(true);

    p.connections[0]!.send({ type: "event", name: "session.added", value: new Uint8Array(16 * MIB + 1) });
    await vi.waitFor(() => expect(reports).toHaveLength(1));
    expect(reports[0]).toMatchObject({
      code: "invalid_host_frame",
      message: "the host sent an undecodable frame; the client cannot read it",
    });
    expect(p.connections).toHaveLength(1);
  });
});
