import { once } from "node:events";
import { createServer, type IncomingMessage, request, type ServerResponse } from "node:http";
import { type AddressInfo, connect, type Socket } from "node:net";
import { setImmediate as nextTurn } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { ATTACHMENT_CHUNK_BYTES } from "../../../src/store/attachment-chunks.js";
import type { HostStore } from "../../../src/store/live-state-store.js";
import { Authenticator } from "../../../src/transport/auth.js";
import { createHttpHandler } from "../../../src/transport/http/router.js";
import { DurableContent } from "../../support/durable-snapshot.js";
import { ADMIN_TOKEN, ALICE_TOKEN, BOB_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { until } from "../../support/until.js";
import { withMembers } from "../../support/with-members.js";
import { api, type Reply } from "./http-client.js";

let h: TestHost | undefined;
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await h?.dispose();
  h = undefined;
});

async function host(http: { maxUploadBytes?: number; uploadQuotaBytes?: number } = {}): Promise<TestHost> {
  h = await startTestHost({ http });
  return h;
}

function upload(bytes: Buffer, headers: Record<string, string> = {}, token = ALICE_TOKEN): Promise<Reply> {
  return api(h!, "/v1/attachments", {
    method: "POST",
    token,
    body: bytes,
    headers: { "content-type": "application/x-test", ...headers },
  });
}

/** An upload sent chunked: no Content-Length, so its size is known only once read. */
function chunkedUpload(bytes: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port: h!.port,
        path: "/v1/attachments",
        method: "POST",
        headers: { authorization: `Bearer ${ALICE_TOKEN}`, "transfer-encoding": "chunked" },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.on("error", reject);
    req.write(bytes.subarray(0, 10));
    req.end(bytes.subarray(10));
  });
}

const idOf = (reply: Reply) => (reply.json as { attachmentId: string }).attachmentId;

describe("POST/GET /v1/attachments: names, types, quota, headers", () => {
  it("the quota holds at its exact total, checked before the body and again with its real size", async () => {
    // sizes past the 4 KiB an upload counts at least
    await host({ maxUploadBytes: 10_000, uploadQuotaBytes: 15_000 });
    expect((await upload(Buffer.alloc(10_001))).json).toEqual({ error: "payload_too_large" });
    const first = await upload(Buffer.alloc(10_000, 1));
    expect(first.status).toBe(200);
    expect((await upload(Buffer.alloc(5_000, 2))).status).toBe(200);
    const over = await upload(Buffer.alloc(1, 3));
    expect(over.status).toBe(413);
    expect(over.json).toEqual({ error: "upload_quota_exceeded", max_bytes: 15_000 });
    // another principal's uploads are not alice's
    expect((await upload(Buffer.alloc(10_000), {}, BOB_TOKEN)).status).toBe(200);
    expect((await upload(Buffer.alloc(5_000), {}, BOB_TOKEN)).status).toBe(200);
    // the stored body is the one sent, whole
    const down = await api(h!, `/v1/attachments/${idOf(first)}`, { token: ALICE_TOKEN });
    expect(down.body.equals(Buffer.alloc(10_000, 1))).toBe(true);
  });

  it("a chunked upload, whose size no header declares, meets the quota once read", async () => {
    await host({ maxUploadBytes: 15_000, uploadQuotaBytes: 15_000 });
    expect((await upload(Buffer.alloc(10_000))).status).toBe(200);
    expect(await chunkedUpload(Buffer.alloc(5_001))).toBe(413);
    expect(await chunkedUpload(Buffer.alloc(5_000))).toBe(200);
    expect(await chunkedUpload(Buffer.alloc(1))).toBe(413);
  });

  it("file names: 1-256 characters, percent-decoded when valid, one visible, no control characters or slashes", async () => {
    await host();
    const nameOf = async (headers: Record<string, string>) => {
      const up = await upload(Buffer.from("x"), headers);
      if (up.status !== 200) return up.json;
      const down = await api(h!, `/v1/attachments/${idOf(up)}`, { token: ALICE_TOKEN });
      return down.headers["content-disposition"];
    };
    const refused = {
      error: "bad_request",
      field: "x-filename",
      message:
        "X-Filename must be 1-256 characters, one of them visible, without control characters or slashes",
    };
    expect(await nameOf({})).toBe("attachment; filename*=UTF-8''attachment");
    expect(await nameOf({ "x-filename": "%C3%BC%20b.txt" })).toBe(
      "attachment; filename*=UTF-8''%C3%BC%20b.txt",
    );
    // not valid percent-encoding: taken as it is
    expect(await nameOf({ "x-filename": "100%" })).toBe("attachment; filename*=UTF-8''100%25");
    expect(await nameOf({ "x-filename": "a".repeat(256) })).toBe(
      `attachment; filename*=UTF-8''${"a".repeat(256)}`,
    );
    expect(await nameOf({ "x-filename": "a".repeat(257) })).toEqual(refused);
    expect(await nameOf({ "x-filename": "" })).toEqual(refused);
    // blank once decoded: a name that shows nothing is refused, and no upload is kept
    const durable = new DurableContent(h!.dbPath);
    const before = durable.snapshot();
    for (const blank of ["%20%20", "%E2%80%8B", "%C2%A0%E3%80%80", "%EF%BB%BF"]) {
      expect([blank, await nameOf({ "x-filename": blank })]).toEqual([blank, refused]);
    }
    expect(durable.snapshot()).toEqual(before);
    durable.close();
    expect(await nameOf({ "x-filename": "%20a%20" })).toBe("attachment; filename*=UTF-8''%20a%20");
    for (const bad of ["a%00b", "a%1Fb", "a%0Ab", "a%7Fb", "a%2Fb", "a%5Cb", "/", "\\"]) {
      expect([bad, await nameOf({ "x-filename": bad })]).toEqual([bad, refused]);
    }
    for (const good of ["a b", "~!", "a%7Eb", "a%20b"]) {
      expect(await nameOf({ "x-filename": good })).toMatch(/^attachment; filename\*=UTF-8''/);
    }
  });

  it("content types: 1-256 characters, application/octet-stream when none is sent", async () => {
    await host();
    const typeOf = async (type: string | undefined) => {
      const up = await api(h!, "/v1/attachments", {
        method: "POST",
        token: ALICE_TOKEN,
        headers: type === undefined ? {} : { "content-type": type },
        ...(type === undefined ? {} : { body: Buffer.from("x") }),
      });
      if (up.status !== 200) return up.json;
      const down = await api(h!, `/v1/attachments/${idOf(up)}`, { token: ALICE_TOKEN });
      return down.headers["content-type"];
    };
    const refused = {
      error: "bad_request",
      field: "content-type",
      message: "Content-Type must be 1-256 characters",
    };
    expect(await typeOf(undefined)).toBe("application/octet-stream");
    expect(await typeOf("t".repeat(256))).toBe("t".repeat(256));
    expect(await typeOf("t".repeat(257))).toEqual(refused);
    expect(await typeOf("")).toEqual(refused);
  });

  it("a download carries its size, a sandbox and no caching; an id outside the alphabet is bad_request", async () => {
    await host();
    const up = await upload(Buffer.from("<html>x</html>"), { "x-filename": "p.html" });
    const down = await api(h!, `/v1/attachments/${idOf(up)}`, { token: ALICE_TOKEN });
    expect(down.status).toBe(200);
    expect(down.headers).toMatchObject({
      "content-type": "application/x-test",
      "content-length": "14",
      "content-disposition": "attachment; filename*=UTF-8''p.html",
      "content-security-policy": "sandbox",
      "x-content-type-options": "nosniff",
      "cache-control": "private, no-store",
    });
    expect(down.text).toBe("<html>x</html>");
    const bad = await api(h!, "/v1/attachments/a.b", { token: ALICE_TOKEN });
    expect(bad.json).toEqual({
      error: "bad_request",
      field: "attachmentId",
      message: "attachmentId must be 1-128 chars of [A-Za-z0-9_-]",
    });
    expect((await api(h!, "/v1/attachments/a/b", { token: ALICE_TOKEN })).status).toBe(404);
  });

  it("the routes match their whole path only, and are counted under their own names", async () => {
    await host();
    const up = await upload(Buffer.from("body"));
    const id = idOf(up);
    expect((await api(h!, `/v1/attachments/${id}`, { token: ALICE_TOKEN })).status).toBe(200);
    expect((await api(h!, `/v1/attachments/${id}/x`, { token: ALICE_TOKEN })).status).toBe(404);
    expect((await api(h!, `/api/v1/attachments/${id}`, { token: ALICE_TOKEN })).status).toBe(404);
    expect((await upload(Buffer.from("x"), {}, ALICE_TOKEN)).status).toBe(200);
    for (const path of ["/v1/attachments/x", "/api/v1/attachments"]) {
      const r = await api(h!, path, { method: "POST", token: ALICE_TOKEN, body: Buffer.from("x") });
      expect([path, r.status]).toEqual([path, 404]);
    }
    const metrics = (await api(h!, "/metrics", { token: ADMIN_TOKEN })).text;
    expect(metrics).toMatch(
      /sessionmux_http_requests_total\{route="POST \/v1\/attachments",status="200"\} 2\n/,
    );
    expect(metrics).toMatch(
      /sessionmux_http_requests_total\{route="GET \/v1\/attachments\/:id",status="200"\} 1\n/,
    );
  });

  it("a handler given no upload ledger has no quota", async () => {
    await host();
    const auth = new Authenticator([{ name: "alice", secret: ALICE_TOKEN, admin: false }]);
    const server = createServer(createHttpHandler(h!.host, auth, { uploadQuotaBytes: 1 }));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const port = (server.address() as AddressInfo).port;
      const res = await fetch(`http://127.0.0.1:${port}/v1/attachments`, {
        method: "POST",
        headers: { authorization: `Bearer ${ALICE_TOKEN}` },
        body: new Uint8Array(10),
      });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("a download to a client that stops reading holds one stored chunk beyond what the kernel took", async () => {
    // The bytes the host takes out of the store for this download, counted as the route pulls them.
    let pulled = 0;
    h = await startTestHost({
      storeView: (store: HostStore) =>
        withMembers(store, {
          attachmentChunks: (id: string) =>
            (async function* () {
              for await (const chunk of store.attachmentChunks(id)) {
                pulled += chunk.byteLength;
                yield chunk;
              }
            })(),
        }),
    });
    const size = 10 * 1024 * 1024;
    const body = Buffer.alloc(size);
    for (let i = 0; i < size; i += 4096) body.writeUInt32BE(i, i);
    const up = await upload(body);
    expect(up.status).toBe(200);
    let answer: ServerResponse | undefined;
    h!.server.on("request", (req: IncomingMessage, res: ServerResponse) => {
      if (req.url?.startsWith("/v1/attachments/")) answer = res;
    });

    const socket = connect(h!.port, "127.0.0.1");
    sockets.push(socket);
    socket.on("error", () => {});
    await once(socket, "connect");
    socket.pause();
    socket.write(
      `GET /v1/attachments/${idOf(up)} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${ALICE_TOKEN}\r\n\r\n`,
    );

    // Stalled: the kernel takes no more, and 64 turns of the event loop pull nothing more.
    await until(
      async () => {
        const before = pulled;
        const sent = answer?.socket?.bytesWritten;
        for (let turn = 0; turn < 64; turn++) await nextTurn();
        return answer?.socket && pulled > 0 && pulled === before && answer.socket.bytesWritten === sent;
      },
      5_000,
      "the download to stall",
    );
    const out = answer!.socket!;
    // What the kernel has taken (headers included): written with its callback come.
    const taken = out.bytesWritten - out.writableLength;
    expect(pulled).toBeLessThan(size);
    // One chunk held by the stream reading the store, one in the socket's backlog (16 KiB mark).
    expect(pulled - taken).toBeLessThanOrEqual(2 * ATTACHMENT_CHUNK_BYTES);

    // A client that reads again gets the whole body.
    const received: Buffer[] = [];
    let length = 0;
    socket.on("data", (chunk: Buffer) => {
      received.push(chunk);
      length += chunk.length;
    });
    socket.resume();
    await until(() => length >= size, 5_000, "the whole body");
    await until(
      () => length - Buffer.concat(received).indexOf("\r\n\r\n") - 4 >= size,
      5_000,
      "the whole body",
    );
    const all = Buffer.concat(received);
    expect(all.subarray(0, 15).toString()).toBe("HTTP/1.1 200 OK");
    expect(all.subarray(all.indexOf("\r\n\r\n") + 4).equals(body)).toBe(true);
  });
});
