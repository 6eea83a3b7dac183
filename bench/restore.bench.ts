/**
 * Restart cost of durable live state: `SessionHost.start()` on a database holding N sessions, each
 * parked on a pending approval with queued prompts behind it, against an empty database; then one
 * control baseline over all of them. Reports wall time and the longest event-loop stall.
 *
 *   node --import tsx bench/restore.bench.ts [sessions=10000] [queuedPerSession=2]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { DemoAgent } from "../src/agents/demo-agent.js";
import { ADMIN } from "../src/host/principal.js";
import { SessionHost } from "../src/host/session-host.js";
import { SqliteSessionStore } from "../src/store/sqlite-store.js";

const SESSIONS = Number(process.argv[2] ?? 10_000);
const QUEUED = Number(process.argv[3] ?? 2);
const CHUNK = 500;

async function seed(path: string, sessions: number): Promise<void> {
  const store = SqliteSessionStore.open(path);
  for (let start = 0; start < sessions; start += CHUNK) {
    const ids = Array.from({ length: Math.min(CHUNK, sessions - start) }, (_, i) => `s-${start + i}`);
    await Promise.all(
      ids.map(async (sessionId) => {
        await store.create({ sessionId, owner: "admin", model: "demo-fast" });
        const turnId = `t-${sessionId}`;
        await store.append(sessionId, [
          { type: "turn/start", data: { turnId, trigger: "prompt" } },
          {
            type: "user/message",
            data: {
              messageId: `m-${sessionId}`,
              source: "user",
              text: "/approve ship",
              attachments: [],
              meta: {},
            },
          },
          {
            type: "interaction/requested",
            data: { turnId, interactionId: `i-${sessionId}`, kind: "approval", action: "ship" },
          },
        ]);
        for (let q = 0; q < QUEUED; q++) {
          await store.enqueuePrompt({
            sessionId,
            itemId: `q-${sessionId}-${q}`,
            queuedAt: Date.now(),
            input: { clientMessageId: `c-${sessionId}-${q}`, text: `queued ${q}` },
          });
        }
      }),
    );
  }
  await store.close();
}

async function measureStart(path: string): Promise<{
  startMs: number;
  startStallMs: number;
  baselineMs: number;
  baselineStallMs: number;
  live: number;
  interactions: number;
}> {
  const store = SqliteSessionStore.open(path);
  const host = new SessionHost({ store, agent: new DemoAgent() });
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  const t0 = performance.now();
  await host.start();
  const startMs = performance.now() - t0;
  delay.disable();
  const startStallMs = delay.max / 1e6;
  const off = host.subscribeControl(ADMIN, () => undefined);
  const baselineDelay = monitorEventLoopDelay({ resolution: 1 });
  baselineDelay.enable();
  const t1 = performance.now();
  const baseline = await host.controlBaseline(ADMIN);
  const baselineMs = performance.now() - t1;
  baselineDelay.disable();
  off();
  const result = {
    startMs,
    startStallMs,
    baselineMs,
    baselineStallMs: baselineDelay.max / 1e6,
    live: baseline.agents.length,
    interactions: baseline.interactions.length,
  };
  await host.shutdown();
  await store.close();
  return result;
}

const dir = mkdtempSync(join(tmpdir(), "sessionmux-restore-"));
try {
  const empty = join(dir, "empty.db");
  await seed(empty, 0);
  const full = join(dir, "full.db");
  const seeded = performance.now();
  await seed(full, SESSIONS);
  process.stdout.write(`seeded ${SESSIONS} sessions in ${Math.round(performance.now() - seeded)} ms\n`);
  for (const [name, path] of [
    ["empty", empty],
    [`${SESSIONS} parked + ${QUEUED} queued each`, full],
  ] as const) {
    const r = await measureStart(path);
    process.stdout.write(
      `${name}: start ${r.startMs.toFixed(0)} ms (longest stall ${r.startStallMs.toFixed(1)} ms), ` +
        `baseline ${r.baselineMs.toFixed(0)} ms (longest stall ${r.baselineStallMs.toFixed(1)} ms), ` +
        `${r.live} live agents, ${r.interactions} pending interactions\n`,
    );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
