import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, ALICE_TOKEN, BOB_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { api } from "./http-client.js";

let h: TestHost;
beforeAll(async () => {
  h = await startTestHost();
});
afterAll(async () => {
  await h?.dispose();
});

async function upload(bytes: Buffer, token = ALICE_TOKEN, name = "photo.png") {
  return api(h, "/v1/attachments", {
    method: "POST",
    token,
    body: bytes,
    headers: { "content-type": "image/png", "x-filename": name },
  });
}

describe("attachments over HTTP", () => {
  it("round-trips bytes above the 1 MiB JSON limit, with type and name", async () => {
    const bytes = randomBytes(3 * 1024 * 1024 + 17);
    const up = await upload(bytes);
    expect(up.status).toBe(200);
    const { attachmentId } = up.json as { attachmentId: string };
    expect(attachmentId).toEqual(expect.any(String));
    const down = await api(h, `/v1/attachments/${attachmentId}`, { token: ALICE_TOKEN });
    expect(down.status).toBe(200);
    expect(down.headers["content-type"]).toBe("image/png");
    expect(down.headers["content-disposition"]).toContain("photo.png");
    expect(down.headers["x-content-type-options"]).toBe("nosniff");
    expect(down.body.equals(bytes)).toBe(true);
  });

  it("is readable by its owner only: another principal gets the same 404 as a missing id", async () => {
    const up = await upload(Buffer.from("secret"));
    const { attachmentId } = up.json as { attachmentId: string };
    const other = await api(h, `/v1/attachments/${attachmentId}`, { token: BOB_TOKEN });
    const missing = await api(h, "/v1/attachments/no-such-attachment", { token: BOB_TOKEN });
    expect(other.status).toBe(404);
    expect(other.text).toBe(missing.text);
    expect(other.json).toEqual({ error: "attachment_not_found" });
    const none = await api(h, `/v1/attachments/${attachmentId}`);
    expect(none.status).toBe(401);
    const admin = await api(h, `/v1/attachments/${attachmentId}`, { token: ADMIN_TOKEN });
    expect(admin.status).toBe(200);
  });

  it("refuses uploads over 10 MiB with 413 and bad file names with 400", async () => {
    const big = await upload(Buffer.alloc(10 * 1024 * 1024 + 1));
    expect(big.status).toBe(413);
    expect(big.json).toEqual({ error: "payload_too_large" });
    const bad = await upload(Buffer.from("x"), ALICE_TOKEN, "..%2Fetc%2Fpasswd");
    expect(bad.status).toBe(400);
    expect(bad.json).toMatchObject({ error: "bad_request" });
  });
});
