import type { ChildProcess } from "node:child_process";
import { once } from "node:events";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { MuxPeer } from "../support/mux-peer.js";
import { tempDir } from "../support/temp-dir.js";
import { type CliHost, spawnCliHost } from "./cli-host.js";
import { scaled } from "./torture-scale.js";

/**
 * Durable live state against a real `sessionmux serve` killed for real: pending approvals and
 * queued prompts survive kill -9 and SIGTERM, first-responder-wins holds across a kill, and every
 * acknowledged prompt (queued or not) reaches the log exactly once.
 */

const TOKEN = "live-state-kill-token";
const WAIT = { timeout: 30_000, interval: 50 };

const dir = tempDir("sessionmux-live-state-kill-");
const hosts: CliHost[] = [];
const peers: MuxPeer[] = [];
afterEach(async () => {
  for (const peer of peers.splice(0)) peer.ws.terminate();
  for (const host of hosts.splice(0)) await host.kill9();
});

async function start(dbPath: string): Promise<{ host: CliHost; peer: MuxPeer }> {
  const host = await spawnCliHost({ dbPath, token: TOKEN });
  hosts.push(host);
  const peer = await MuxPeer.connect(host.wsUrl, { token: TOKEN });
  peers.push(peer);
  return { host, peer };
}

async function stop(host: CliHost, signal: "SIGKILL" | "SIGTERM"): Promise<void> {
  if (signal === "SIGKILL") return host.kill9();
  await terminate(host.child);
}

async function terminate(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  await exited;
}

async function readLog(peer: MuxPeer, sessionId: string): Promise<SessionEvent[]> {
  const events: SessionEvent[] = [];
  for (;;) {
    const page = await peer.call<{ events: SessionEvent[]; hasMore: boolean }>("session.page", {
      sessionId,
      afterSeq: events.at(-1)?.seq ?? 0,
      limit: 1000,
    });
    events.push(...page.events);
    if (!page.hasMore || page.events.length === 0) return events;
  }
}

function userTexts(log: SessionEvent[]): string[] {
  return log.flatMap((e) => (e.type === "user/message" ? [e.data.text] : []));
}

async function pendingInteraction(peer: MuxPeer, sessionId: string): Promise<string> {
  return vi.waitFor(async () => {
    const log = await readLog(peer, sessionId);
    const requested = log.findLast((e) => e.type === "interaction/requested");
    expect(requested).toBeDefined();
    return requested?.type === "interaction/requested" ? requested.data.interactionId : "";
  }, WAIT);
}

describe("torture: durable live state through real kills", () => {
  it.each(["SIGKILL", "SIGTERM"] as const)(
    "%s: a pending approval and a queued prompt survive; the answer finishes the turn, the prompt runs once",
    async (signal) => {
      const dbPath = dir.file(`parked-${signal}.db`);
      let { host, peer } = await start(dbPath);
      await peer.call("session.create", { sessionId: "s" });
      await peer.call("session.prompt", { sessionId: "s", text: "/approve ship", clientMessageId: "a" });
      const interactionId = await pendingInteraction(peer, "s");
      const queued = await peer.call<{ queued: boolean; itemId: string }>("session.prompt", {
        sessionId: "s",
        text: "queued while parked",
        clientMessageId: "q",
      });
      expect(queued.queued).toBe(true);
      await stop(host, signal);

      ({ host, peer } = await start(dbPath));
      const parked = await peer.call<{ sessions: { sessionId: string }[] }>("session.list", { parked: true });
      expect(parked.sessions.map((r) => r.sessionId)).toEqual(["s"]);
      await peer.call("session.respond", { interactionId, response: { outcome: "approve" } });
      const log = await vi.waitFor(async () => {
        const events = await readLog(peer, "s");
        expect(events.filter((e) => e.type === "turn/end").map((e) => e.data.state)).toEqual([
          "completed",
          "completed",
        ]);
        return events;
      }, WAIT);
      expect(userTexts(log)).toEqual(["/approve ship", "queued while parked"]);
      expect(log.filter((e) => e.type === "interaction/resolved")).toHaveLength(1);
      expect(log.find((e) => e.type === "tool/result")).toMatchObject({ data: { ok: true } });
      // the retry of the queued prompt now answers with the turn it became
      const retried = await peer.call<{ queued: boolean; turnId: string }>("session.prompt", {
        sessionId: "s",
        text: "queued while parked",
        clientMessageId: "q",
      });
      expect(retried.queued).toBe(false);
      expect(userTexts(await readLog(peer, "s"))).toHaveLength(2);
    },
    120_000,
  );

  it("8 concurrent answers straddling a kill -9: exactly one interaction/resolved, and it is the acknowledged one", async () => {
    const rounds = scaled(3);
    for (let round = 0; round < rounds; round++) {
      const dbPath = dir.file(`answers-${round}.db`);
      let { host, peer } = await start(dbPath);
      const answerers: MuxPeer[] = [];
      for (let i = 0; i < 8; i++) answerers.push(await MuxPeer.connect(host.wsUrl, { token: TOKEN }));
      peers.push(...answerers);
      await peer.call("session.create", { sessionId: "s" });
      await peer.call("session.prompt", { sessionId: "s", text: "/approve race", clientMessageId: "a" });
      const interactionId = await pendingInteraction(peer, "s");
      const acked: string[] = [];
      const answers = answerers.map(async (answerer, i) => {
        const outcome = i % 2 === 0 ? "approve" : "deny";
        try {
          await answerer.call("session.respond", { interactionId, response: { outcome } }, 5_000);
          acked.push(outcome);
        } catch {
          // refused (the other answer won) or never answered (the host died first)
        }
      });
      await new Promise((resolve) => setTimeout(resolve, Math.floor(Math.random() * 8)));
      await host.kill9();
      await Promise.all(answers);

      ({ host, peer } = await start(dbPath));
      let resolved = (await readLog(peer, "s")).filter((e) => e.type === "interaction/resolved");
      if (resolved.length === 0) {
        // no answer committed before the kill: none may have been acknowledged either
        expect(acked).toEqual([]);
        await peer.call("session.respond", { interactionId, response: { outcome: "approve" } });
      }
      const log = await vi.waitFor(async () => {
        const events = await readLog(peer, "s");
        expect(events.at(-1)?.type).toBe("turn/end");
        return events;
      }, WAIT);
      resolved = log.filter((e) => e.type === "interaction/resolved");
      expect(resolved).toHaveLength(1);
      const winner = resolved[0]?.type === "interaction/resolved" ? resolved[0].data.resolution : undefined;
      for (const outcome of acked) expect(winner).toEqual({ outcome });
      await host.kill9();
    }
  }, 240_000);

  it("a prompt flood with kills: every acknowledged prompt reaches the log exactly once", async () => {
    const kills = scaled(3);
    const perRound = 120;
    const sessions = ["f0", "f1", "f2", "f3"];
    const dbPath = dir.file("flood.db");
    let { host, peer } = await start(dbPath);
    for (const sessionId of sessions) await peer.call("session.create", { sessionId });
    const acked = new Set<string>();
    const sent = new Set<string>();
    for (let round = 0; round < kills; round++) {
      const senders: MuxPeer[] = [];
      for (let i = 0; i < 4; i++) senders.push(await MuxPeer.connect(host.wsUrl, { token: TOKEN }));
      peers.push(...senders);
      const flood = senders.map(async (sender, s) => {
        for (let i = 0; i < perRound / senders.length; i++) {
          const text = `r${round}-s${s}-p${i}`;
          sent.add(text);
          try {
            await sender.call(
              "session.prompt",
              { sessionId: sessions[i % sessions.length], text, clientMessageId: text },
              5_000,
            );
            acked.add(text);
          } catch {
            return; // the host is gone: this prompt was never acknowledged
          }
        }
      });
      await new Promise((resolve) => setTimeout(resolve, 300 + Math.floor(Math.random() * 600)));
      await host.kill9();
      await Promise.all(flood);
      ({ host, peer } = await start(dbPath));
    }
    // the last host runs what is still queued; then every session is quiet
    const counts = await vi.waitFor(
      async () => {
        const seen = new Map<string, number>();
        for (const sessionId of sessions) {
          const log = await readLog(peer, sessionId);
          const starts = log.filter((e) => e.type === "turn/start").length;
          expect(log.filter((e) => e.type === "turn/end")).toHaveLength(starts);
          for (const text of userTexts(log)) seen.set(text, (seen.get(text) ?? 0) + 1);
        }
        for (const text of acked) expect(seen.get(text), text).toBeGreaterThanOrEqual(1);
        return seen;
      },
      { timeout: 60_000, interval: 200 },
    );
    const duplicated = [...counts].filter(([, n]) => n > 1).map(([text]) => text);
    const strangers = [...counts.keys()].filter((text) => !sent.has(text));
    process.stdout.write(
      `live-state flood: ${kills} kills, ${sent.size} sent, ${acked.size} acknowledged, ${counts.size} in the log\n`,
    );
    expect(acked.size).toBeGreaterThan(kills * 10);
    expect(duplicated).toEqual([]);
    expect(strangers).toEqual([]);
  }, 240_000);
});
