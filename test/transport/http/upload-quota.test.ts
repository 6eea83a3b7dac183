import Database from "better-sqlite3";
import { afterEach, describe, expect, it, vi } from "vitest";
import { AttackHost } from "../../support/attack-host.js";
import { heldRequest } from "../../support/held-request.js";
import { ADMIN_TOKEN } from "../../support/host.js";
import { MuxPeer } from "../../support/mux-peer.js";

const MIB = 1024 * 1024;

let host: AttackHost | undefined;
afterEach(async () => {
  await host?.dispose();
  host = undefined;
});

function upload(bytes: number): Promise<Response> {
  return host!.postUpload(new Uint8Array(bytes).fill(3));
}

/** An upload sent in `chunks` pieces `gapMs` apart, the way a slow link sends it. */
function slowUpload(chunkBytes: number, chunks: number, gapMs: number): Promise<Response> {
  let sent = 0;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (sent > 0) await new Promise((resolve) => setTimeout(resolve, gapMs));
      controller.enqueue(new Uint8Array(chunkBytes).fill(5));
      if (++sent === chunks) controller.close();
    },
  });
  return host!.postUpload(body, { "content-length": String(chunkBytes * chunks) });
}

async function download(id: string): Promise<number> {
  const res = await fetch(`${host!.url}/v1/attachments/${id}`, {
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  await res.arrayBuffer();
  return res.status;
}

describe("uploads: size limit, per-principal quota, expiry (§8)", () => {
  it("past the quota an upload is upload_quota_exceeded; unreferenced uploads expire, used ones stay", async () => {
    host = await AttackHost.start([
      "--max-upload-bytes",
      String(2 * MIB),
      "--upload-quota-bytes",
      String(3 * MIB),
      "--upload-ttl-ms",
      "4000",
    ]);
    expect((await upload(2 * MIB + 1)).status).toBe(413);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await upload(MIB);
      expect(res.status).toBe(200);
      ids.push(((await res.json()) as { attachmentId: string }).attachmentId);
    }
    const over = await upload(MIB);
    expect(over.status).toBe(413);
    expect(await over.json()).toEqual({ error: "upload_quota_exceeded", max_bytes: 3 * MIB });
    expect(await download(ids[0]!)).toBe(200);

    // One of them is used by a prompt before it expires: it belongs to the session from then on.
    const peer = await MuxPeer.connect(host.wsUrl, { token: ADMIN_TOKEN });
    const { header } = await peer.call<{ header: { sessionId: string } }>("session.create", {});
    const used = ids.pop()!;
    await peer.call("session.prompt", {
      sessionId: header.sessionId,
      text: "see the file",
      clientMessageId: "with-file",
      attachments: [{ name: "f.bin", type: "application/octet-stream", attachmentId: used }],
    });
    await peer.disconnect();

    // Nobody references them: they expire, their bytes are freed, and the quota is free again.
    await vi.waitFor(async () => expect(await Promise.all(ids.map(download))).toEqual([404, 404]), {
      timeout: 30_000,
      interval: 200,
    });
    // ... and the file gives their pages back: what is left is the used upload and little else.
    await vi.waitFor(
      () => {
        const db = new Database(host!.dbPath, { readonly: true });
        try {
          expect(db.prepare("SELECT attachment_id AS id FROM attachments").all()).toEqual([{ id: used }]);
          expect(db.pragma("freelist_count", { simple: true })).toBe(0);
          const pages = db.pragma("page_count", { simple: true }) as number;
          expect(pages * (db.pragma("page_size", { simple: true }) as number)).toBeLessThan(1.5 * MIB);
        } finally {
          db.close();
        }
      },
      { timeout: 30_000, interval: 200 },
    );
    expect((await upload(MIB)).status).toBe(200);
    expect(await download(used)).toBe(200);
  });

  it("a client over the quota gets its 413 whatever the size or pace of its body, not a cut connection", async () => {
    host = await AttackHost.start(["--upload-quota-bytes", String(MIB)]);
    expect((await upload(MIB)).status).toBe(200);
    // more than the sockets' buffers take at once: were the connection closed as soon as the 413
    // went out, the client would still be sending and fail with EPIPE instead of reading it
    const large = await upload(8 * MIB);
    expect(large.status).toBe(413);
    expect(await large.json()).toEqual({ error: "upload_quota_exceeded", max_bytes: MIB });
    // 512 KiB over 3.5 s, as a slow link sends it
    const slow = await slowUpload(64 * 1024, 8, 500);
    expect(slow.status).toBe(413);
    expect(await slow.json()).toEqual({ error: "upload_quota_exceeded", max_bytes: MIB });
    // nothing of the refused bodies was kept: the quota is still full
    expect((await upload(1)).status).toBe(413);
  });

  it("an empty upload counts 4 KiB toward the quota, so the quota bounds how many a principal stores", async () => {
    // Before, an empty upload counted nothing: any number of rows could be stored under any quota.
    host = await AttackHost.start(["--upload-quota-bytes", String(4 * 4096)]);
    const replies = [];
    for (let i = 0; i < 6; i++) replies.push((await upload(0)).status);
    expect(replies).toEqual([200, 200, 200, 200, 413, 413]);
    const db = new Database(host.dbPath, { readonly: true });
    try {
      expect(db.prepare("SELECT count(*) AS n FROM attachments").get()).toEqual({ n: 4 });
    } finally {
      db.close();
    }
  });

  it("uploads being received count toward the quota from their first byte, however many are sent at once", async () => {
    // Before, each upload was checked against the stored ones alone: any number of them sent at once
    // on as many connections were each read whole into memory (24 of 10 MiB held 276 MiB).
    host = await AttackHost.start([
      "--max-upload-bytes",
      String(4 * MIB),
      "--upload-quota-bytes",
      String(8 * MIB),
    ]);
    const heldBefore = await host.startLoopWindow();
    const uploads = [];
    for (let i = 0; i < 16; i++) {
      const body = Buffer.alloc(4 * MIB, 9);
      const options = {
        path: "/v1/attachments",
        token: ADMIN_TOKEN,
        contentType: "application/octet-stream",
      };
      uploads.push(await heldRequest(host.cli.port, { ...options, body, chunked: i % 2 === 1 }));
    }
    // every body but its last byte has reached the host: what it holds of them is the quota's worth
    const held = (await host.loopStall()).heldBytes - heldBefore;
    const replies = await Promise.all(uploads.map((upload) => upload.finish()));
    console.log(`16 uploads of 4 MiB sent at once, 8 MiB quota: ${(held / MIB).toFixed(1)} MiB held`);
    expect(held).toBeLessThan(16 * MIB);
    expect(replies.filter((reply) => reply.status === 200)).toHaveLength(2);
    for (const reply of replies.filter((r) => r.status !== 200)) {
      expect(reply).toEqual({ status: 413, body: { error: "upload_quota_exceeded", max_bytes: 8 * MIB } });
    }
    // the refused ones left nothing counted: with the two stored, the quota is full, and no more
    expect((await upload(1)).status).toBe(413);
  });
});
