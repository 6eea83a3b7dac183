import type { RunningHost } from "../../src/server.js";
import type { FanoutSubject } from "../harness/subject.js";
import { tempFolder } from "../harness/temp-folder.js";
import type { DeltaEvent } from "../harness/workload.js";

export const BENCH_TOKEN = "bench-admin-token";
export const BENCH_OWNER = "admin";

/** Principal `i` of `writers` (see `startSessionmux`): one per independent writer. */
export const writerName = (i: number) => `writer-${i}`;
export const writerToken = (i: number) => `bench-writer-token-${i}`;

/** TCP connections a host's server still holds. */
export const openConnections = (running: RunningHost): Promise<number> =>
  new Promise((resolve, reject) =>
    running.server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
  );

export interface SessionmuxSubject extends FanoutSubject {
  readonly running: RunningHost;
}

/**
 * A real host (store, host, mux) in this process on 127.0.0.1; events enter through the store the
 * way an agent's emits do, and leave through `session.follow`.
 */
export async function startSessionmux(
  options: { dbPath?: string; mux?: Record<string, unknown>; writers?: number } = {},
): Promise<SessionmuxSubject> {
  const { startHost } = await import("../../src/server.js");
  const folder = options.dbPath ? undefined : tempFolder("host");
  const running = await startHost({
    host: "127.0.0.1",
    port: 0,
    dbPath: options.dbPath ?? folder!.file("sessions.db"),
    tokens: [
      { name: BENCH_OWNER, secret: BENCH_TOKEN, admin: true },
      ...Array.from({ length: options.writers ?? 0 }, (_, i) => ({
        name: writerName(i),
        secret: writerToken(i),
        admin: false,
      })),
    ],
    ...(options.mux ? { mux: options.mux } : {}),
  });
  const ids: string[] = [];
  return {
    name: "sessionmux",
    kind: "mux",
    url: running.wsUrl,
    token: BENCH_TOKEN,
    running,
    async prepare(sessionIds) {
      for (const sessionId of sessionIds) {
        const outcome = await running.store.create({ sessionId, owner: BENCH_OWNER, model: "demo" });
        if (outcome.status !== "created") throw new Error(`create ${sessionId}: ${outcome.status}`);
        ids.push(sessionId);
      }
    },
    async publish(index, events: readonly DeltaEvent[]) {
      const outcome = await running.store.append(ids[index]!, [...events]);
      if (outcome.status !== "appended") throw new Error(`append: ${outcome.status}`);
      return outcome.events.at(-1)!.seq;
    },
    openSockets: () => openConnections(running),
    async close() {
      await running.close();
      folder?.remove();
    },
  };
}
