import { getEventListeners, once } from "node:events";
import { describe, expect, it, vi } from "vitest";
import WebSocket from "ws";
import { type SessionmuxError, SUBPROTOCOL } from "../../protocol/index.js";
import { readHostFrame } from "../../src/client/host-frame-reader.js";
import { createNodeClient } from "../../src/client/node.js";
import { RemoteStreamCarrierError } from "../../src/client/remote-errors.js";
import { RequestRegistry } from "../../src/client/request-registry.js";
import type { WebSocketLike } from "../../src/client/socket.js";
import { createSocketLink } from "../../src/client/socket-link.js";
import { peerFixture } from "./peer-fixture.js";

const { cleanups, peer, track } = peerFixture();

describe("a client's calls and streams on one socket", () => {
  it("a late error answer to an aborted call is reported, since no call waits for it any more", async () => {
    const p = await peer();
    const reports: SessionmuxError[] = [];
    const c = track(createNodeClient({ url: p.url, token: "t", onError: (e) => reports.push(e) }));
    const controller = new AbortController();
    const pending = c.list({}, { signal: controller.signal }).catch((e: unknown) => e);
    await vi.waitFor(() => expect(p.received("call")).toHaveLength(1));
    controller.abort("left");
    await expect(pending).resolves.toMatchObject({ code: "aborted" });
    const { id } = p.received("call")[0] as { id: number };
    p.connections[0]!.send({
      type: "error",
      id,
      error: { code: "session_not_found", message: "late", category: "business", retryable: false },
    });
    await vi.waitFor(() =>
      expect(reports.map((r) => [r.code, r.message])).toEqual([["session_not_found", "late"]]),
    );
  });

  it("a stream the host ended sends no close; a stream the caller leaves sends exactly one", async () => {
    let opened = 0;
    const p = await peer({
      onOpen: (conn, f) => {
        opened += 1;
        if (opened === 1) conn.send({ type: "end", id: f.id });
      },
    });
    const c = track(createNodeClient({ url: p.url, token: "t" }));
    await new Promise<void>((resolve, reject) =>
      c.open("session.control", {}).subscribe({ complete: resolve, error: reject }),
    );
    const left = c.open("session.control", {}).subscribe({ error: () => {} });
    await vi.waitFor(() => expect(p.received("open")).toHaveLength(2));
    left.unsubscribe();
    await vi.waitFor(() => expect(p.received("close")).toHaveLength(1));
    const second = p.received("open")[1] as { id: number };
    expect(p.received("close")).toEqual([{ type: "close", id: second.id }]);
  });
});

describe("a socket link used directly with a caller's signal", () => {
  async function link() {
    const p = await peer({
      onCall: (_conn, f) => (f.method === "session.models" ? { models: [] } : undefined),
    });
    const socket = new WebSocket(p.url, [SUBPROTOCOL], { perMessageDeflate: false });
    cleanups.push(() => socket.terminate());
    socket.binaryType = "arraybuffer";
    const registry = new RequestRegistry();
    socket.on("message", (data) => {
      const reading = readHostFrame(data);
      if (reading.ok && reading.frame.type !== "hello") registry.deliver(reading.frame);
    });
    await once(socket, "open");
    let nextId = 1;
    const l = createSocketLink({
      socketId: 1,
      socket: socket as unknown as WebSocketLike,
      registry,
      nextFrameId: () => nextId++,
      isCurrent: () => true,
      maxPayloadBytes: () => undefined,
    });
    return { p, registry, link: l };
  }

  it("a call whose signal already fired rejects with the signal's reason and sends nothing", async () => {
    const { p, link: l } = await link();
    const aborted = l.call("session.list", {}, AbortSignal.abort("gone")).catch((e: unknown) => e);
    await expect(l.call("session.models", {})).resolves.toEqual({ models: [] });
    expect(p.received("call").map((f) => f.method)).toEqual(["session.models"]);
    await expect(aborted).resolves.toBe("gone");
  });

  it("a call leaves no listener on the caller's signal once answered or failed", async () => {
    const { registry, link: l } = await link();
    const { signal } = new AbortController();
    await expect(l.call("session.models", {}, signal)).resolves.toEqual({ models: [] });
    expect(getEventListeners(signal, "abort")).toHaveLength(0);
    const unanswered = l.call("session.list", {}, signal).catch((e: unknown) => e);
    expect(getEventListeners(signal, "abort")).toHaveLength(1);
    const lost = new RemoteStreamCarrierError("socket_lost");
    registry.failAll(lost);
    await expect(unanswered).resolves.toBe(lost);
    expect(getEventListeners(signal, "abort")).toHaveLength(0);
  });
});
