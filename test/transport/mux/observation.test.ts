import { afterAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../../support/host.js";
import { tempDir } from "../../support/temp-dir.js";
import { until } from "../../support/until.js";
import { connect, createSession, headSeq } from "./mux-fixture.js";

describe("observation never activates (reliability.md promise 4), through the wire", () => {
  const dir = tempDir();
  const hosts: TestHost[] = [];
  afterAll(async () => {
    for (const h of hosts) await h.close();
    dir.remove();
  });

  it("after a restart on the same database, page, follow, control, list and search leave a session cold", async () => {
    const dbPath = dir.file("sessions.db");
    const first = await startTestHost({ dbPath });
    hosts.push(first);
    const writer = await connect(first);
    const sessionId = await createSession(writer, { title: "observed" });
    const follow = writer.follow(sessionId);
    await writer.call("session.prompt", { sessionId, text: "remember the walrus", clientMessageId: "o1" });
    await writer.waitItem(follow, (i) => i.kind === "caughtUp");
    await until(() => writer.events(follow).some((e) => e.type === "turn/end"), 20_000, "turn/end");
    await writer.disconnect();
    await first.close();

    const second = await startTestHost({ dbPath });
    hosts.push(second);
    const head = await headSeq(second, sessionId);
    expect(second.host.live.isLive(sessionId)).toBe(false);
    const reader = await connect(second);

    const page = await reader.call<{ events: unknown[]; headSeq: number }>("session.page", { sessionId });
    expect(page.headSeq).toBe(head);
    const id = reader.follow(sessionId);
    await reader.waitItem(id, (i) => i.kind === "caughtUp");
    const control = reader.open("session.control");
    const baseline = await reader.waitItem<{ agents: { sessionId: string }[] }>(control, () => true);
    expect(baseline.agents.some((a) => a.sessionId === sessionId)).toBe(false);
    const list = await reader.call<{ sessions: { sessionId: string; live: boolean }[] }>("session.list", {});
    expect(list.sessions.find((r) => r.sessionId === sessionId)?.live).toBe(false);
    const search = await reader.call<{ hits: { sessionId: string }[] }>("session.search", {
      query: "walrus",
    });
    expect(search.hits.some((h) => h.sessionId === sessionId)).toBe(true);
    // Reconnect and follow again from the cursor: still nothing starts.
    reader.close(id);
    const again = reader.follow(sessionId, { afterSeq: head });
    await reader.waitItem(again, (i) => i.kind === "caughtUp");

    expect(second.host.live.isLive(sessionId)).toBe(false);
    expect(second.host.live.agents().some((a) => a.sessionId === sessionId)).toBe(false);
    expect(await headSeq(second, sessionId)).toBe(head);
    expect(reader.events(again)).toHaveLength(0);
    await reader.disconnect();
  });
});
