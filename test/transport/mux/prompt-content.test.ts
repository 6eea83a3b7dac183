import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../../support/host.js";
import { until } from "../../support/until.js";
import { api } from "../http/http-client.js";
import { createSession } from "./mux-fixture.js";
import { refusalHost } from "./refusal-host.js";

const RULE = "must contain a visible character, not only whitespace or invisible characters";
const BLANKS = ["", "   ", "\n\t\r", "\u00a0\u3000", "\u200b\ufeff", "\u0007"];
const bytes = new Uint8Array([1, 2, 3]);

describe("a prompt, its shown text, its attachments and a queued prompt's edit must carry content (over the mux)", () => {
  let cold: string;
  let uploaded: string;

  const shared = refusalHost(async (host, _peer) => {
    cold = "cold-one";
    const created = await host.store.create({ sessionId: cold, owner: "admin", model: "demo" });
    expect(created.status).toBe("created");
    const upload = await api(host, "/v1/attachments", {
      method: "POST",
      token: ADMIN_TOKEN,
      headers: { "content-type": "text/plain", "x-filename": "a.txt" },
      body: Buffer.from("abc"),
    });
    expect(upload.status).toBe(200);
    uploaded = (upload.json as { attachmentId: string }).attachmentId;
  });

  /** Refused with `bad_request` naming `field`; nothing durable changed and no agent started. */
  async function refused(params: Record<string, unknown>, field: string, message: string): Promise<void> {
    const error = await shared.peer.callError("session.prompt", {
      sessionId: cold,
      clientMessageId: "m1",
      ...params,
    });
    expect(error.code).toBe("bad_request");
    expect(error.message).toBe(`params${field}: ${message}`);
    expect(error.data).toEqual({ field });
    shared.expectUnchanged();
    expect(shared.host.host.live.isLive(cold)).toBe(false);
    const page = await shared.peer.call<{ headSeq: number; projection: { turnCount: number } }>(
      "session.page",
      {
        sessionId: cold,
      },
    );
    expect(page.headSeq).toBe(1);
    expect(page.projection.turnCount).toBe(0);
  }

  for (const text of BLANKS) {
    it(`text ${JSON.stringify(text)} and no attachments → bad_request naming /text`, async () => {
      await refused({ text }, "/text", `${RULE}, unless the prompt has attachments`);
    });
  }

  it("a blank display over a real text → bad_request naming /display", async () => {
    for (const display of BLANKS) await refused({ text: "hi", display }, "/display", RULE);
  });

  it("an attachment with a blank name → bad_request naming its name", async () => {
    await refused(
      { text: "hi", attachments: [{ name: " \u200b", type: "text/plain", bytes }] },
      "/attachments/0/name",
      RULE,
    );
  });

  it("an attachment that says two places where its content is → bad_request naming it", async () => {
    const where = "give at most one of attachmentId, url or bytes: where the attachment's content is";
    await refused(
      {
        text: "",
        attachments: [{ name: "a.txt", type: "text/plain", url: "https://example.invalid/a", bytes }],
      },
      "/attachments/0",
      where,
    );
    await refused(
      {
        text: "hi",
        attachments: [
          { name: "a.txt", type: "text/plain", bytes },
          { name: "b.txt", type: "text/plain", attachmentId: uploaded, bytes },
        ],
      },
      "/attachments/1",
      where,
    );
  });

  it("the same upload attached twice → bad_request naming the second", async () => {
    const twice = { name: "a.txt", type: "text/plain", attachmentId: uploaded };
    await refused(
      { text: "hi", attachments: [twice, { ...twice, name: "again.txt" }] },
      "/attachments/1/attachmentId",
      `attachment ${uploaded} is already attachment 0 of this prompt`,
    );
  });

  it("attachments without text, and text with a visible character among blanks, are prompts", async () => {
    const sessionId = await createSession(shared.peer);
    const first = await shared.peer.call<{ seq: number }>("session.prompt", {
      sessionId,
      clientMessageId: "only-an-attachment",
      text: "",
      attachments: [{ name: "a.txt", type: "text/plain", attachmentId: uploaded }],
    });
    expect(first.seq).toBeGreaterThan(0);
    await until(() => !shared.host.host.live.isRunning(sessionId), 10_000, "the turn to end");
    const second = await shared.peer.call<{ queued: boolean }>("session.prompt", {
      sessionId,
      clientMessageId: "spaced",
      text: " \u200b x ",
    });
    expect(second.queued).toBe(false);
  });

  it("editing a queued prompt to a blank text → bad_request naming /op/text; the queue unchanged", async () => {
    const sessionId = await createSession(shared.peer);
    await shared.peer.call("session.prompt", { sessionId, clientMessageId: "busy", text: "/sleep 600000" });
    const queued = await shared.peer.call<{ queued: boolean; itemId: string }>("session.prompt", {
      sessionId,
      clientMessageId: "waiting",
      text: "later",
    });
    expect(queued.queued).toBe(true);
    await shared.takeBaseline();
    for (const text of BLANKS) {
      const error = await shared.peer.callError("session.updateQueue", {
        sessionId,
        op: { edit: true, itemId: queued.itemId, text },
      });
      expect(error.code).toBe("bad_request");
      expect(error.message).toBe(`params/op/text: ${RULE}`);
      expect(error.data).toEqual({ field: "/op/text" });
      shared.expectUnchanged();
      expect(shared.host.host.live.queue(sessionId).map((item) => item.text)).toEqual(["later"]);
    }
    await shared.peer.call("session.updateQueue", { sessionId, op: { clear: true } });
    await shared.peer.call("session.cancel", { sessionId });
  });
});
