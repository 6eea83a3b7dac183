import { connect } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { heldRequest } from "../../support/held-request.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { MuxPeer } from "../../support/mux-peer.js";

const MIB = 1024 * 1024;

let host: TestHost | undefined;
afterEach(async () => {
  await host?.dispose();
  host = undefined;
});

/** A seen mark of `bytes` of JSON: the object, then spaces up to the size, which JSON allows. */
function seenBody(bytes: number): Buffer {
  const json = Buffer.from(JSON.stringify({ completion_settled_at_ms: 0 }));
  return Buffer.concat([json, Buffer.alloc(bytes - json.length, 0x20)]);
}

/**
 * On one connection, a download its client never reads, then a POST pipelined behind it whose
 * body is declared and only begun; the connection is closed while the POST waits for its turn.
 */
async function postGoneWhileWaiting(
  port: number,
  download: string,
  post: string,
  declared: number,
): Promise<void> {
  const socket = connect(port, "127.0.0.1");
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  const answered = new Promise<void>((resolve) => socket.once("data", () => resolve()));
  const auth = `Authorization: Bearer ${ADMIN_TOKEN}`;
  socket.write(
    `GET ${download} HTTP/1.1\r\nHost: h\r\n${auth}\r\n\r\n` +
      `POST ${post} HTTP/1.1\r\nHost: h\r\n${auth}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${declared}\r\n\r\n{`,
  );
  // the download is under way (and stalls: its client reads no more), so the POST waits
  await answered;
  socket.pause();
  socket.destroy();
  await new Promise((resolve) => socket.once("close", resolve));
}

describe("a request whose connection closed before its body was read", () => {
  it("gives back what its body was counted at: the principal's later bodies and uploads are read", async () => {
    host = await startTestHost({ http: { maxUploadBytes: 32 * MIB } });
    const peer = await MuxPeer.connect(host.wsUrl, { token: ADMIN_TOKEN });
    const { header } = await peer.call<{ header: { sessionId: string } }>("session.create", {});
    await peer.disconnect();
    const uploaded = await fetch(`${host.url}/v1/attachments`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      body: new Uint8Array(32 * MIB),
    });
    const { attachmentId } = (await uploaded.json()) as { attachmentId: string };
    const seen = `/v1/sessions/${header.sessionId}/seen`;
    // nine bodies of 1 MiB declared, past the 8 MiB one principal's bodies may hold at once
    const download = `/v1/attachments/${attachmentId}`;
    for (let i = 0; i < 9; i++) await postGoneWhileWaiting(host.port, download, seen, MIB);
    const alone = await heldRequest(host.port, {
      path: seen,
      token: ADMIN_TOKEN,
      contentType: "application/json",
      body: seenBody(1024),
      chunked: false,
    });
    expect(await alone.finish()).toEqual({ status: 200, body: { has_unseen_completion: false } });
    // three uploads of 10 MiB declared: beside the stored 32 MiB, they leave 2 MiB of the quota
    for (let i = 0; i < 3; i++) await postGoneWhileWaiting(host.port, download, "/v1/attachments", 10 * MIB);
    const next = await fetch(`${host.url}/v1/attachments`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      body: new Uint8Array(4 * MIB),
    });
    expect(next.status).toBe(200);
  }, 60_000);
});
