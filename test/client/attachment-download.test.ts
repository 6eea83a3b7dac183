import { getEventListeners } from "node:events";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ParamsOf } from "../../protocol/index.js";
import { createClient, createNodeSocketFactory } from "../../src/client/node.js";
import { RemoteStreamCarrierError } from "../../src/client/remote-errors.js";
import { browserLikeClient } from "../support/browser-like-client.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import { peerFixture } from "./peer-fixture.js";

const KIB = 1024;
const MIB = 1024 * KIB;

const { cleanups, peer, track } = peerFixture();
let host: TestHost | undefined;
afterEach(async () => {
  await host?.dispose();
  host = undefined;
});

const fast = { baseMs: 10, capMs: 50 };

const pattern = (n: number) => new Uint8Array(n).map((_, i) => (i * 31) % 251);

async function hostWithAttachment(bytes: Uint8Array): Promise<{ sessionId: string; attachmentId: string }> {
  host = await startTestHost();
  const { header } = await host.host.call({ name: "admin", admin: true }, "session.create", {});
  const attachmentId = await host.store.putAttachment({
    owner: "admin",
    name: "big.bin",
    type: "x/y",
    bytes,
  });
  return { sessionId: header.sessionId, attachmentId };
}

async function proxyTo(
  target: TestHost,
  options: Parameters<typeof startTcpProxy>[1] = {},
): Promise<TcpProxy> {
  const proxy = await startTcpProxy(target.port, options);
  cleanups.push(() => proxy.stop());
  return proxy;
}

const viaProxy = (target: TestHost, proxy: TcpProxy) =>
  target.wsUrl.replace(`:${target.port}`, `:${proxy.port}`);

describe("SessionmuxClient.download reads an attachment in pieces (protocol-v1 §5 session.download)", () => {
  it("a browser-like client reads a 1 MiB attachment over a 192 KiB/s link on one socket, its keepalive never firing", async () => {
    const bytes = pattern(MIB);
    const { sessionId, attachmentId } = await hostWithAttachment(bytes);
    const proxy = await proxyTo(host!, { hostBytesPerSecond: 192 * KIB });
    const client = track(browserLikeClient(viaProxy(host!, proxy), ADMIN_TOKEN));
    const progress: number[] = [];
    const answer = await client.download(sessionId, attachmentId, {
      onProgress: (received, size) => {
        expect(size).toBe(bytes.byteLength);
        progress.push(received);
      },
    });
    expect({ name: answer.name, type: answer.type, size: answer.size }).toEqual({
      name: "big.bin",
      type: "x/y",
      size: MIB,
    });
    expect(Buffer.from(answer.bytes).equals(Buffer.from(bytes))).toBe(true);
    expect(progress.at(-1)).toBe(MIB);
    expect(progress).toEqual([...progress].sort((a, b) => a - b));
    // `call("session.attachment")` is the same download
    const called = await client.call("session.attachment", { sessionId, attachmentId });
    expect(Buffer.from(called.bytes).equals(Buffer.from(bytes))).toBe(true);
    expect(proxy.accepted).toBe(1);
    expect(proxy.cuts).toBe(0);
  }, 60_000);

  it("a socket lost mid-download: the stream opens again at the byte reached, and the bytes are whole", async () => {
    const bytes = pattern(4 * MIB);
    const { sessionId, attachmentId } = await hostWithAttachment(bytes);
    const proxy = await proxyTo(host!);
    const client = track(
      createClient({
        url: viaProxy(host!, proxy),
        token: ADMIN_TOKEN,
        socketFactory: createNodeSocketFactory(),
        backoff: { baseMs: 10, capMs: 50 },
      }),
    );
    let cutAt = 0;
    let reached = 0;
    /** The bytes the caller had been told of when each open was made. */
    const reachedAtOpen: number[] = [];
    const open = client.open.bind(client);
    const opened = vi.spyOn(client, "open");
    opened.mockImplementation(((method: "session.download", params: ParamsOf<"session.download">) => {
      reachedAtOpen.push(reached);
      return open(method, params);
    }) as typeof client.open);
    const answer = await client.download(sessionId, attachmentId, {
      onProgress: (received) => {
        reached = received;
        if (cutAt === 0 && received >= MIB) {
          cutAt = received;
          proxy.cutAll();
        }
      },
    });
    expect(Buffer.from(answer.bytes).equals(Buffer.from(bytes))).toBe(true);
    expect(proxy.accepted).toBe(2);
    const offsets = opened.mock.calls.map(([, params]) => (params as { offset?: number }).offset);
    // opened again at the byte reached, never from the start: pieces already in the client's
    // socket buffer when the proxy cut it may still arrive first, so that byte is at or past the
    // cut (a stream opened on the dying socket before the client saw it go opens once more)
    expect(offsets[0]).toBe(0);
    expect(offsets.length).toBeGreaterThanOrEqual(2);
    expect(offsets.slice(1)).toEqual(reachedAtOpen.slice(1));
    for (const offset of offsets.slice(1)) expect(offset).toBeGreaterThanOrEqual(cutAt);
  }, 60_000);

  it("nothing arriving for idleTimeoutMs fails with timeout; the caller's signal with aborted", async () => {
    const p = await peer({
      onOpen: (conn, f) =>
        conn.send({ type: "item", id: f.id, value: { kind: "head", name: "a", type: "x/y", size: 10 } }),
    });
    const client = track(createClient({ url: p.url, token: "t", socketFactory: createNodeSocketFactory() }));
    await expect(client.download("s", "a", { idleTimeoutMs: 200 })).rejects.toMatchObject({
      code: "timeout",
      data: { method: "session.download", timeoutMs: 200, received: 0 },
    });
    const controller = new AbortController();
    const aborted = client.download("s", "a", { signal: controller.signal, idleTimeoutMs: 60_000 });
    controller.abort();
    await expect(aborted).rejects.toMatchObject({ code: "aborted" });
    await expect(client.download("s", "a", { signal: controller.signal })).rejects.toMatchObject({
      code: "aborted",
    });
  });

  it("a host error ends the download with it, and an attachment whose size changes between opens is refused", async () => {
    let opens = 0;
    const p = await peer({
      onOpen: (conn, f) => {
        opens += 1;
        const { attachmentId } = f.params as { attachmentId: string };
        if (attachmentId === "gone") {
          conn.send({
            type: "error",
            id: f.id,
            error: { code: "attachment_not_found", message: "gone", category: "business", retryable: false },
          });
          return;
        }
        conn.send({
          type: "item",
          id: f.id,
          value: { kind: "head", name: "a", type: "x/y", size: 4 + opens },
        });
        conn.send({ type: "item", id: f.id, value: { kind: "bytes", offset: 0, bytes: new Uint8Array(2) } });
        if (opens === 1) conn.socket.terminate();
      },
    });
    const client = track(
      createClient({
        url: p.url,
        token: "t",
        socketFactory: createNodeSocketFactory(),
        backoff: { baseMs: 10, capMs: 50 },
      }),
    );
    await expect(client.download("s", "gone")).rejects.toMatchObject({ code: "attachment_not_found" });
    opens = 0;
    await expect(client.download("s", "changes")).rejects.toMatchObject({ code: "attachment_not_found" });
    expect(opens).toBe(2);
  });

  it("pieces before the head, out of order or past the size are repaired by opening again at the byte reached", async () => {
    const offsets: number[] = [];
    const piece = (offset: number, values: number[]) => ({
      kind: "bytes",
      offset,
      bytes: new Uint8Array(values),
    });
    const p = await peer({
      onOpen: (conn, f) => {
        const { offset } = f.params as { offset: number };
        offsets.push(offset);
        const send = (value: unknown) => conn.send({ type: "item", id: f.id, value });
        const head = { kind: "head", name: "a", type: "x/y", size: 6 };
        if (offsets.length === 1) send(piece(0, [1, 2]));
        else if (offsets.length === 2) {
          send(head);
          send(piece(2, [3, 4]));
        } else if (offsets.length === 3) {
          send(head);
          send(piece(0, [1, 2, 3, 4]));
          send(piece(4, [5, 6, 7, 8]));
        } else {
          send(head);
          send(piece(4, [5, 6]));
          conn.send({ type: "end", id: f.id });
        }
      },
    });
    const client = track(
      createClient({ url: p.url, token: "t", socketFactory: createNodeSocketFactory(), backoff: fast }),
    );
    const answer = await client.download("s", "a");
    expect([...answer.bytes]).toEqual([1, 2, 3, 4, 5, 6]);
    expect(offsets).toEqual([0, 0, 0, 4]);
  });

  it("ended by the host before its last byte it fails invalid_host_frame; the client closed under it, with the carrier error", async () => {
    let answer = true;
    const p = await peer({
      onOpen: (conn, f) => {
        conn.send({ type: "item", id: f.id, value: { kind: "head", name: "a", type: "x/y", size: 10 } });
        conn.send({ type: "item", id: f.id, value: { kind: "bytes", offset: 0, bytes: new Uint8Array(2) } });
        if (answer) conn.send({ type: "end", id: f.id });
      },
    });
    const client = track(createClient({ url: p.url, token: "t", socketFactory: createNodeSocketFactory() }));
    await expect(client.download("s", "a")).rejects.toMatchObject({
      code: "invalid_host_frame",
      data: { method: "session.download", received: 2 },
    });
    answer = false;
    let received = 0;
    const pending = client
      .download("s", "a", { onProgress: (n) => (received = n) })
      .catch((error: unknown) => error);
    await vi.waitFor(() => expect(received).toBe(2));
    await client.close();
    const closed = await pending;
    expect(closed).toBeInstanceOf(RemoteStreamCarrierError);
    expect(closed).toMatchObject({ reason: "client_closed" });
  });

  it("a head whose size is no byte count fails invalid_host_frame at once; a large one is allocated as its bytes arrive", async () => {
    // Before, such a size threw out of the item's callback, unhandled, and the download waited
    // for its idle timeout; and the whole size was allocated at the head: one small frame naming
    // 3 GiB made the client hold 3 GiB.
    const sizes = [-1, 1.5, 3 * 1024 * MIB];
    const p = await peer({
      onOpen: (conn, f) => {
        const send = (value: unknown) => conn.send({ type: "item", id: f.id, value });
        send({ kind: "head", name: "a", type: "x/y", size: sizes.shift() });
        send({ kind: "bytes", offset: 0, bytes: new Uint8Array(4) });
      },
    });
    const client = track(createClient({ url: p.url, token: "t", socketFactory: createNodeSocketFactory() }));
    for (const size of [-1, 1.5]) {
      await expect(client.download("s", "a", { idleTimeoutMs: 60_000 })).rejects.toMatchObject({
        code: "invalid_host_frame",
        message: `the host sent session.download a size of ${size}; the client cannot read it`,
      });
    }
    const before = process.memoryUsage().arrayBuffers;
    let received = 0;
    const stop = new AbortController();
    const pending = client
      .download("s", "a", {
        signal: stop.signal,
        onProgress: (n) => (received = n),
        maxBytes: 4 * 1024 * MIB,
      })
      .catch((error: unknown) => error);
    await vi.waitFor(() => expect(received).toBe(4));
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(64 * MIB);
    stop.abort();
    expect(await pending).toMatchObject({ code: "aborted" });
  });

  it("a head naming more than maxBytes fails payload_too_large before a byte is kept; one within it is read", async () => {
    // Before, the body grew to whatever size the head named as bytes arrived: a host naming 3 GiB
    // and sending on made the client hold all it sent.
    const sizes = [3 * 1024 * MIB, 2 * MIB + 1, 2 * MIB];
    const p = await peer({
      onOpen: (conn, f) => {
        const send = (value: unknown) => conn.send({ type: "item", id: f.id, value });
        const size = sizes.shift()!;
        send({ kind: "head", name: "a", type: "x/y", size });
        for (let offset = 0; offset < Math.min(size, 8 * MIB); offset += MIB)
          send({ kind: "bytes", offset, bytes: new Uint8Array(Math.min(MIB, size - offset)) });
        conn.send({ type: "end", id: f.id });
      },
    });
    const client = track(createClient({ url: p.url, token: "t", socketFactory: createNodeSocketFactory() }));
    let received = 0;
    await expect(client.download("s", "a", { onProgress: (n) => (received = n) })).rejects.toMatchObject({
      code: "payload_too_large",
      data: { method: "session.download", maxBytes: 64 * MIB, size: 3 * 1024 * MIB },
    });
    expect(received).toBe(0);
    await expect(client.download("s", "a", { maxBytes: 2 * MIB })).rejects.toMatchObject({
      code: "payload_too_large",
      data: { maxBytes: 2 * MIB, size: 2 * MIB + 1 },
    });
    expect((await client.download("s", "a", { maxBytes: 2 * MIB })).size).toBe(2 * MIB);
  });

  it("a maxBytes of NaN refuses the download rather than lifting the bound", async () => {
    const p = await peer({
      onOpen: (conn, f) => {
        conn.send({ type: "item", id: f.id, value: { kind: "head", name: "a", type: "x/y", size: MIB } });
        conn.send({
          type: "item",
          id: f.id,
          value: { kind: "bytes", offset: 0, bytes: new Uint8Array(MIB) },
        });
        conn.send({ type: "end", id: f.id });
      },
    });
    const client = track(createClient({ url: p.url, token: "t", socketFactory: createNodeSocketFactory() }));
    await expect(client.download("s", "a", { maxBytes: Number.NaN })).rejects.toMatchObject({
      code: "payload_too_large",
      data: { size: MIB },
    });
    expect((await client.download("s", "a")).size).toBe(MIB);
  });

  it("a host without session.download answering more than maxBytes in one message fails payload_too_large as well", async () => {
    // The bound held only a head: a host answering the stream unknown_method, and the call that
    // follows with the whole attachment, gave the caller more than its maxBytes.
    const p = await peer({
      onOpen: (conn, f) =>
        conn.send({
          type: "error",
          id: f.id,
          error: { code: "unknown_method", message: "no", category: "protocol", retryable: false },
        }),
      onCall: () => ({ name: "a", type: "x/y", size: 2 * MIB, bytes: new Uint8Array(2 * MIB) }),
    });
    const client = track(createClient({ url: p.url, token: "t", socketFactory: createNodeSocketFactory() }));
    await expect(client.download("s", "a", { maxBytes: MIB })).rejects.toMatchObject({
      code: "payload_too_large",
      data: { method: "session.download", maxBytes: MIB, size: 2 * MIB },
    });
    expect((await client.download("s", "a", { maxBytes: 2 * MIB })).bytes.byteLength).toBe(2 * MIB);
  });

  it("an attachment larger than one host message is whole once read", async () => {
    const size = 20 * MIB + 3;
    const whole = pattern(size);
    const p = await peer({
      onOpen: (conn, f) => {
        const send = (value: unknown) => conn.send({ type: "item", id: f.id, value });
        send({ kind: "head", name: "a", type: "x/y", size });
        for (let offset = 0; offset < size; offset += MIB)
          send({ kind: "bytes", offset, bytes: whole.subarray(offset, Math.min(offset + MIB, size)) });
        conn.send({ type: "end", id: f.id });
      },
    });
    const client = track(createClient({ url: p.url, token: "t", socketFactory: createNodeSocketFactory() }));
    const answer = await client.download("s", "a");
    expect(answer.size).toBe(size);
    expect(Buffer.from(answer.bytes).equals(Buffer.from(whole))).toBe(true);
  });

  it("a retryable host error is retried once per host generation, then waits: the idle timeout ends it", async () => {
    let opens = 0;
    const p = await peer({
      onOpen: (conn, f) => {
        opens += 1;
        conn.send({
          type: "error",
          id: f.id,
          error: { code: "host_shutting_down", message: "later", category: "internal", retryable: true },
        });
      },
    });
    const client = track(
      createClient({ url: p.url, token: "t", socketFactory: createNodeSocketFactory(), backoff: fast }),
    );
    await expect(client.download("s", "a", { idleTimeoutMs: 500 })).rejects.toMatchObject({
      code: "timeout",
    });
    expect(opens).toBe(2);
  });

  it("an idle bound past the longest timer a runtime keeps (2^31 - 1 ms) is waited for, not fired after 1 ms", async () => {
    const p = await peer({
      onOpen: (conn, f) => {
        setTimeout(() => {
          conn.send({ type: "item", id: f.id, value: { kind: "head", name: "a", type: "x/y", size: 1 } });
          conn.send({
            type: "item",
            id: f.id,
            value: { kind: "bytes", offset: 0, bytes: new Uint8Array([7]) },
          });
          conn.send({ type: "end", id: f.id });
        }, 100);
      },
    });
    const client = track(createClient({ url: p.url, token: "t", socketFactory: createNodeSocketFactory() }));
    const answer = await client.download("s", "a", { idleTimeoutMs: 2 ** 31 });
    expect([...answer.bytes]).toEqual([7]);
  });

  it("without an idle bound a slow host is waited for; the caller's signal is let go once it settles", async () => {
    const p = await peer({
      onOpen: (conn, f) => {
        conn.send({ type: "item", id: f.id, value: { kind: "head", name: "a", type: "x/y", size: 1 } });
        setTimeout(() => {
          conn.send({
            type: "item",
            id: f.id,
            value: { kind: "bytes", offset: 0, bytes: new Uint8Array([9]) },
          });
          conn.send({ type: "end", id: f.id });
        }, 100);
      },
    });
    const client = track(createClient({ url: p.url, token: "t", socketFactory: createNodeSocketFactory() }));
    const controller = new AbortController();
    const answer = await client.download("s", "a", {
      idleTimeoutMs: Number.POSITIVE_INFINITY,
      signal: controller.signal,
    });
    expect([...answer.bytes]).toEqual([9]);
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
    // an abort's reason is the error's cause
    const aborting = new AbortController();
    const pending = client.download("s", "a", { signal: aborting.signal });
    const reason = new Error("user left");
    aborting.abort(reason);
    await expect(pending).rejects.toMatchObject({ code: "aborted", cause: reason });
  });
});
