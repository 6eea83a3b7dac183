import type { Subscription } from "rxjs";
import { describe, expect, it, vi } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { controlMirror } from "../../src/client/control-mirror.js";
import type { ControlMirror } from "../../src/client/control-mirror-reducer.js";
import { followSession } from "../../src/client/follow-session.js";
import { createNodeClient, type SessionmuxClient } from "../../src/client/node.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { type ChildHost, freePort, startChildHost } from "./child-host.js";
import { startCliFollower } from "./cli-follower.js";

const TOKEN = "restart-token";
const backoff = { baseMs: 20, capMs: 300 };
const cleanups = cleanupsAfterEach();

async function fullLog(client: SessionmuxClient, sessionId: string): Promise<SessionEvent[]> {
  const all: SessionEvent[] = [];
  for (;;) {
    const page = await client.page({ sessionId, afterSeq: all.length, limit: 1000 });
    all.push(...(page.events as SessionEvent[]));
    if (!page.hasMore) return all;
  }
}

describe("host killed with SIGKILL and restarted mid-stream", () => {
  it("SDK and CLI followers resume without gap or duplicate, the mirror rebuilds with a new generation, prompts append once", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const port = await freePort();
    const dbPath = dir.file("sessions.db");
    let host: ChildHost = await startChildHost({ port, dbPath, token: TOKEN });
    cleanups.push(() => host.kill());

    const client = createNodeClient({ url: host.url, token: TOKEN, backoff });
    cleanups.push(() => client.close());
    await client.create({ sessionId: "streaming" });
    const prompted = ["p1", "p2", "p3", "p4", "p5"];
    for (const sessionId of prompted) await client.create({ sessionId });

    const seqs: number[] = [];
    const resets: string[] = [];
    const followErrors: unknown[] = [];
    const follow: Subscription = followSession(client, "streaming").subscribe({
      next: (u) => {
        if (u.kind === "events") for (const e of u.events) seqs.push(e.seq);
        if (u.kind === "reset") resets.push(u.epoch);
      },
      error: (e: unknown) => followErrors.push(e),
    });
    cleanups.push(() => follow.unsubscribe());
    const cli = startCliFollower(host.url, "streaming", TOKEN);
    cleanups.push(async () => {
      cli.child.kill("SIGKILL");
    });
    const mirrors: ControlMirror[] = [];
    const control = controlMirror(client).subscribe((m) => mirrors.push(m));
    cleanups.push(() => control.unsubscribe());
    await vi.waitFor(() => expect(mirrors.at(-1)?.generation).toBeDefined());
    const firstGeneration = client.hello?.generation;

    await client.prompt({ sessionId: "streaming", text: "/stream 100000 2" });
    await vi.waitFor(() => expect(seqs.length).toBeGreaterThan(300), { timeout: 30_000 });
    await vi.waitFor(() => expect(cli.lines.length).toBeGreaterThan(0), { timeout: 30_000 });

    // Prompts into idle sessions, sent together with the kill: each is answered or lost in flight.
    const prompts = prompted.map((sessionId) =>
      client
        .prompt({ sessionId, text: `once-${sessionId}`, clientMessageId: `cm-${sessionId}` })
        .catch((error: unknown) => ({ failed: error })),
    );
    await host.kill();
    const killedAt = seqs.length;
    host = await startChildHost({ port, dbPath, token: TOKEN });

    const answers = await Promise.all(prompts);
    for (const answer of answers) expect(answer).toMatchObject({ queued: false });

    await vi.waitFor(() => expect(client.hello?.generation).toBeDefined(), { timeout: 30_000 });
    expect(client.hello?.generation).not.toBe(firstGeneration);
    await vi.waitFor(() => expect(mirrors.at(-1)).toMatchObject({ generationChanged: true, stale: false }), {
      timeout: 30_000,
    });
    expect(mirrors.some((m) => m.stale)).toBe(true);

    // The interrupted stream's log is final now; the follower must hold exactly all of it.
    const log = await fullLog(client, "streaming");
    expect(log.at(-1)).toMatchObject({ type: "turn/end", data: { state: "interrupted" } });
    await vi.waitFor(() => expect(seqs.length).toBe(log.length), { timeout: 30_000 });
    expect(seqs).toEqual(log.map((e) => e.seq));
    expect(seqs.length).toBeGreaterThanOrEqual(killedAt);
    expect(resets).toEqual([]);
    expect(followErrors).toEqual([]);
    // The CLI follower resumed silently too: every committed event printed exactly once.
    await vi.waitFor(() => expect(cli.lines.length).toBeGreaterThanOrEqual(log.length), { timeout: 30_000 });
    expect(await cli.stop()).toBe(0);
    expect(cli.lines.map((l) => (JSON.parse(l) as { seq: number }).seq)).toEqual(log.map((e) => e.seq));

    for (const sessionId of prompted) {
      const messages = (await fullLog(client, sessionId)).filter((e) => e.type === "user/message");
      expect(messages.map((m) => (m.data as { text: string }).text)).toEqual([`once-${sessionId}`]);
    }
    // A second send of the same clientMessageId returns the first answer and appends nothing.
    const again = await client.prompt({ sessionId: "p1", text: "once-p1", clientMessageId: "cm-p1" });
    expect(again).toEqual(answers[0]);
    expect((await fullLog(client, "p1")).filter((e) => e.type === "user/message")).toHaveLength(1);
  }, 120_000);
});
