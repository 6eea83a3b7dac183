import Database from "better-sqlite3";
import { afterEach, describe, expect, it, vi } from "vitest";
import { AttackHost } from "../../support/attack-host.js";
import { ADMIN_TOKEN } from "../../support/host.js";

const MIB = 1024 * 1024;

let host: AttackHost | undefined;
afterEach(async () => {
  await host?.dispose();
  host = undefined;
});

async function upload(bytes: number): Promise<Response> {
  return fetch(`${host!.url}/v1/attachments`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/octet-stream" },
    body: new Uint8Array(bytes).fill(3),
  });
}

async function download(id: string): Promise<number> {
  const res = await fetch(`${host!.url}/v1/attachments/${id}`, {
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  await res.arrayBuffer();
  return res.status;
}

describe("uploads: size limit, per-principal quota, expiry (§8)", () => {
  it("past the quota an upload is upload_quota_exceeded; unreferenced uploads expire and free their pages", async () => {
    host = await AttackHost.start([
      "--max-upload-bytes",
      String(2 * MIB),
      "--upload-quota-bytes",
      String(3 * MIB),
      "--upload-ttl-ms",
      "2000",
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
    expect(await over.json()).toEqual({ error: "upload_quota_exceeded" });
    expect(await download(ids[0]!)).toBe(200);

    // Nobody references them: they expire, their bytes are freed, and the quota is free again.
    await vi.waitFor(async () => expect(await Promise.all(ids.map(download))).toEqual([404, 404, 404]), {
      timeout: 30_000,
      interval: 200,
    });
    const db = new Database(host.dbPath, { readonly: true });
    try {
      expect(db.prepare("SELECT count(*) AS n FROM attachments").get()).toEqual({ n: 0 });
      expect(db.pragma("freelist_count", { simple: true }) as number).toBeGreaterThan((3 * MIB) / 4096 / 2);
    } finally {
      db.close();
    }
    expect((await upload(MIB)).status).toBe(200);
  });
});
