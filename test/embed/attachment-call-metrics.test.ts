import { describe, expect, it } from "vitest";
import { createNodeClient } from "../../src/client/node.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { MuxPeer } from "../support/mux-peer.js";
import { mountedApp } from "./app-fixture.js";

const cleanups = cleanupsAfterEach();

async function upload(authority: string, text: string): Promise<string> {
  const response = await fetch(`http://${authority}/chat/v1/attachments`, {
    method: "POST",
    headers: { authorization: "Bearer user:alice", "content-type": "text/plain", "x-filename": "notes.txt" },
    body: text,
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { attachmentId: string }).attachmentId;
}

async function callCounts(authority: string): Promise<string[]> {
  const text = await (
    await fetch(`http://${authority}/chat/metrics`, { headers: { authorization: "Bearer user:root" } })
  ).text();
  return text
    .split("\n")
    .filter((line) => /^sessionmux_call_seconds_count\{method="session\.(attachment|download)"/.test(line));
}

describe("call metrics of a mounted host's attachment reads", () => {
  it("count a session.download stream's opening as session.download and a one-message session.attachment as itself", async () => {
    const { authority } = await mountedApp(cleanups);
    const url = `ws://${authority}/chat/api/remote.mux`;
    const client = createNodeClient({ url, token: "user:alice" });
    cleanups.push(() => client.close());
    const { sessionId } = (await client.create({ title: "with a file" })).header;
    const text = "the attachment's bytes";
    const bytes = new TextEncoder().encode(text);
    const attachmentId = await upload(authority, text);

    const downloaded = await client.download(sessionId, attachmentId);
    expect(downloaded.bytes).toEqual(bytes);
    await expect(client.download(sessionId, "no-such-upload")).rejects.toMatchObject({
      code: "attachment_not_found",
    });
    const peer = await MuxPeer.connect(url, { token: "user:alice" });
    cleanups.push(() => peer.ws.terminate());
    const whole = await peer.call<{ bytes: Uint8Array }>("session.attachment", { sessionId, attachmentId });
    expect(new Uint8Array(whole.bytes)).toEqual(bytes);

    expect((await callCounts(authority)).sort()).toEqual([
      'sessionmux_call_seconds_count{method="session.attachment",outcome="ok"} 1',
      'sessionmux_call_seconds_count{method="session.download",outcome="attachment_not_found"} 1',
      'sessionmux_call_seconds_count{method="session.download",outcome="ok"} 1',
    ]);
  });
});
