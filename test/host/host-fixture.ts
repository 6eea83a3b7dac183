import Database from "better-sqlite3";
import type { Logger } from "pino";
import { expect, vi } from "vitest";
import type { NewEvent, SessionEvent } from "../../protocol/index.js";
import type { AgentDriver } from "../../src/agents/agent.js";
import { DemoAgent } from "../../src/agents/demo-agent.js";
import { SessionHost } from "../../src/host/session-host.js";
import type { AppendOptions, SessionStore } from "../../src/store/session-store.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { HostMetrics } from "../../src/transport/metrics.js";
import { gate } from "../support/gate.js";
import { tempDir } from "../support/temp-dir.js";
import { readWholeLog } from "../support/whole-log.js";

export interface HostFixture {
  host: SessionHost;
  store: SqliteSessionStore;
  metrics: HostMetrics;
  dbPath: string;
  /** Shuts the host down and opens a new one on the same database (a host restart). */
  restart(options?: { idleDetachMs?: number }): Promise<void>;
  /** Shuts down, closes the store, removes the folder. */
  dispose(): Promise<void>;
}

/** A real SessionHost on a real SQLite file in a temp folder; no transport. */
export async function openHost(
  options: {
    idleDetachMs?: number;
    agent?: AgentDriver;
    dbPath?: string;
    maxTranscriptBytes?: number;
    logger?: Logger;
    turnStopGraceMs?: number;
    now?: () => number;
  } = {},
): Promise<HostFixture> {
  const dir = options.dbPath ? undefined : tempDir();
  const dbPath = options.dbPath ?? dir!.file("sessions.db");
  const agent = options.agent ?? new DemoAgent();
  const boot = async (idleDetachMs = options.idleDetachMs) => {
    const metrics = new HostMetrics();
    const store = SqliteSessionStore.open(dbPath, { metrics });
    const host = new SessionHost({
      store,
      agent,
      metrics,
      ...(idleDetachMs ? { idleDetachMs } : {}),
      ...(options.maxTranscriptBytes ? { maxTranscriptBytes: options.maxTranscriptBytes } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.turnStopGraceMs !== undefined ? { turnStopGraceMs: options.turnStopGraceMs } : {}),
      ...(options.now ? { now: options.now } : {}),
    });
    await host.start();
    return { host, store, metrics };
  };
  const fixture = { dbPath, ...(await boot()) } as HostFixture;
  fixture.restart = async (restartOptions = {}) => {
    await fixture.host.shutdown();
    await fixture.store.close();
    Object.assign(fixture, await boot(restartOptions.idleDetachMs ?? options.idleDetachMs));
  };
  fixture.dispose = async () => {
    await fixture.host.shutdown();
    await fixture.store.close();
    dir?.remove();
  };
  return fixture;
}

/**
 * An agent with the demo agent's models under another name, whose turns `runTurn` runs (it may
 * hand them to the demo agent); it has no `continueTurn`.
 */
export function demoAgentWith(
  name: string,
  runTurn: (
    turn: Parameters<AgentDriver["runTurn"]>[0],
    demo: DemoAgent,
  ) => ReturnType<AgentDriver["runTurn"]>,
): AgentDriver {
  const demo = new DemoAgent();
  return {
    name,
    defaultModel: demo.defaultModel,
    models: () => demo.models(),
    runTurn: (turn) => runTurn(turn, demo),
  };
}

/** An agent whose turn waits for `release` when its prompt is "wait"; every other turn completes. */
export function heldAgent() {
  const held = gate();
  const agent = demoAgentWith("held", async (turn) => {
    if (turn.prompt.text === "wait") await held.promise;
    return { state: "completed" };
  });
  return { agent, release: held.open };
}

/**
 * Runs `before` inside the store's append, ahead of the write, for the first append `matches` picks
 * (another writer's change landing between a host's check and its write). Says whether it ran.
 */
export function beforeAppend(
  store: Pick<SessionStore, "append">,
  matches: (events: NewEvent[], options: AppendOptions | undefined) => boolean,
  before: () => Promise<void>,
): { ran: boolean } {
  const append = store.append.bind(store);
  const seen = { ran: false };
  vi.spyOn(store, "append").mockImplementation(async (sessionId, events, options) => {
    if (!seen.ran && matches(events, options)) {
      seen.ran = true;
      await before();
    }
    return append(sessionId, events, options);
  });
  return seen;
}

/**
 * Another writer records the prompt `clientMessageId` first, opening its own turn `otherTurnId`,
 * inside the store's append that would open the host's turn for it; `then` runs once that write
 * is in. Says whether it ran, as `beforeAppend`.
 */
export function recordedFirstElsewhere(
  store: Pick<SessionStore, "append">,
  sessionId: string,
  clientMessageId: string,
  otherTurnId: string,
  then: () => Promise<void> = async () => undefined,
): { ran: boolean } {
  return beforeAppend(
    store,
    (_events, options) =>
      options?.prompt?.clientMessageId === clientMessageId && options.prompt.record.turnId !== otherTurnId,
    async () => {
      const won = await store.append(
        sessionId,
        [
          { type: "turn/start", data: { turnId: otherTurnId, trigger: "prompt" } },
          {
            type: "user/message",
            data: { messageId: "m-other", source: "user", text: clientMessageId, attachments: [], meta: {} },
          },
        ],
        { prompt: { clientMessageId, record: { queued: false, turnId: otherTurnId } } },
      );
      expect(won.status).toBe("appended");
      await then();
    },
  );
}

/** Every event of the session's current epoch. */
export async function readLog(store: SqliteSessionStore, sessionId: string): Promise<SessionEvent[]> {
  const outcome = await readWholeLog(store, sessionId);
  if (outcome.status !== "ok") throw new Error(`log of ${sessionId}: ${outcome.status}`);
  return outcome.events;
}

/** Waits until the turn's `turn/end` is committed and returns the turn's events. */
export async function turnEvents(
  store: SqliteSessionStore,
  sessionId: string,
  turnId: string,
): Promise<SessionEvent[]> {
  return vi.waitFor(
    async () => {
      const log = await readLog(store, sessionId);
      const start = log.findIndex((e) => e.type === "turn/start" && e.data.turnId === turnId);
      const end = log.findIndex((e) => e.type === "turn/end" && e.data.turnId === turnId);
      expect(start).toBeGreaterThanOrEqual(0);
      expect(end).toBeGreaterThan(start);
      return log.slice(start, end + 1);
    },
    { timeout: 10_000, interval: 10 },
  );
}

/** Runs `fn` and returns the SessionmuxError code it fails with. */
export async function errorCode(fn: () => Promise<unknown>): Promise<{ code: string; data: unknown }> {
  try {
    await fn();
  } catch (err) {
    const e = err as { code?: string; data?: unknown };
    return { code: e.code ?? "thrown-without-code", data: e.data };
  }
  return { code: "succeeded", data: undefined };
}

export function assistantText(events: SessionEvent[]): string {
  return events.flatMap((e) => (e.type === "assistant/delta" ? [e.data.text] : [])).join("");
}

/** Attachment rows and their chunk rows in the database file, read beside the host. */
export function storedAttachments(dbPath: string): { rows: number; chunks: number } {
  const db = new Database(dbPath, { readonly: true });
  try {
    const count = (table: string) =>
      (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
    return { rows: count("attachments"), chunks: count("attachment_chunks") };
  } finally {
    db.close();
  }
}
