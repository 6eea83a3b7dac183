import { describe, expect, it } from "vitest";
import { BOB_TOKEN } from "../../support/host.js";
import { api } from "../http/http-client.js";
import { createSession } from "./mux-fixture.js";
import { refusalHost } from "./refusal-host.js";

const inline = { name: "inline.bin", type: "application/octet-stream", bytes: new Uint8Array([1, 2, 3]) };
const UNDECODABLE = "the attachment's data: URL cannot be decoded; send valid base64 or percent-encoded data";

describe("a prompt whose attachments cannot be read is refused when sent, keeping nothing (over the mux)", () => {
  let cold: string;
  let bobsUpload: string;

  const shared = refusalHost(async (host, _peer) => {
    cold = "cold-one";
    expect((await host.store.create({ sessionId: cold, owner: "admin", model: "demo" })).status).toBe(
      "created",
    );
    const upload = await api(host, "/v1/attachments", {
      method: "POST",
      token: BOB_TOKEN,
      headers: { "content-type": "text/plain", "x-filename": "b.txt" },
      body: Buffer.from("bob's"),
    });
    expect(upload.status).toBe(200);
    bobsUpload = (upload.json as { attachmentId: string }).attachmentId;
  });

  const unreadable: [string, Record<string, unknown>, string, unknown][] = [
    [
      "inline bytes before an upload that does not exist",
      { name: "gone.txt", type: "text/plain", attachmentId: "no-such-upload" },
      "attachment_not_found",
      { attachmentId: "no-such-upload" },
    ],
    [
      "inline bytes before another principal's upload",
      { name: "b.txt", type: "text/plain", attachmentId: "BOB" },
      "attachment_not_found",
      undefined,
    ],
    [
      "inline bytes before an undecodable data: URL",
      { name: "x.txt", type: "text/plain", url: "data:text/plain;base64,@@@" },
      "bad_request",
      { field: "/attachments/1/url" },
    ],
  ];

  for (const [name, second, code, data] of unreadable) {
    it(`a started prompt with ${name} → ${code}; no bytes kept, no turn, no agent`, async () => {
      const attachment = second.attachmentId === "BOB" ? { ...second, attachmentId: bobsUpload } : second;
      const error = await shared.peer.callError("session.prompt", {
        sessionId: cold,
        clientMessageId: "m1",
        text: "see these",
        attachments: [inline, attachment],
      });
      expect(error.code).toBe(code);
      if (code === "bad_request") expect(error.message).toBe(UNDECODABLE);
      expect(error.data).toEqual(data ?? { attachmentId: bobsUpload });
      shared.expectUnchanged();
      expect(shared.host.host.live.isLive(cold)).toBe(false);
    });
  }

  it("a prompt behind a running turn naming a missing upload → attachment_not_found, nothing queued", async () => {
    const sessionId = await createSession(shared.peer);
    await shared.peer.call("session.prompt", { sessionId, clientMessageId: "busy", text: "/sleep 600000" });
    await shared.takeBaseline();
    const error = await shared.peer.callError("session.prompt", {
      sessionId,
      clientMessageId: "later",
      text: "and this file",
      attachments: [{ name: "gone.txt", type: "text/plain", attachmentId: "no-such-upload" }],
    });
    expect(error.code).toBe("attachment_not_found");
    expect(error.message).toBe("no attachment no-such-upload; upload it first");
    shared.expectUnchanged();
    expect(shared.host.host.live.queue(sessionId)).toEqual([]);
    const undecodable = await shared.peer.callError("session.prompt", {
      sessionId,
      clientMessageId: "later-2",
      text: "and this link",
      attachments: [{ name: "x.txt", type: "text/plain", url: "data:text/plain;base64,@@@" }],
    });
    expect(undecodable.code).toBe("bad_request");
    expect(undecodable.data).toEqual({ field: "/attachments/0/url" });
    shared.expectUnchanged();
    expect(shared.host.host.live.queue(sessionId)).toEqual([]);
    await shared.peer.call("session.cancel", { sessionId });
  });
});
