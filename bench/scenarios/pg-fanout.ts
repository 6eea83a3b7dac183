import type { FanoutSubject } from "../harness/subject.js";
import type { DeltaEvent } from "../harness/workload.js";
import { dropSchema, newSchema } from "./pg-append.js";
import { BENCH_OWNER, BENCH_TOKEN, openConnections } from "./sessionmux-subject.js";

/**
 * Two hosts on one PostgreSQL schema, in this process: the writer's host A commits, the followers
 * connect to `followOn` ("A": same host; "B": every event crosses hosts by LISTEN/NOTIFY and a
 * read of the rows). Events enter through A's store the way an agent's emits do.
 */
export async function startPgPair(url: string, followOn: "A" | "B"): Promise<FanoutSubject> {
  const { startHost } = await import("../../src/server.js");
  const schema = newSchema(`fanout_${followOn.toLowerCase()}`);
  const start = (hostId: string) =>
    startHost({
      host: "127.0.0.1",
      port: 0,
      dbPath: url,
      dbSchema: schema,
      hostId,
      tokens: [{ name: BENCH_OWNER, secret: BENCH_TOKEN, admin: true }],
    });
  const a = await start("bench-a");
  const b = await start("bench-b");
  const ids: string[] = [];
  return {
    name: followOn === "A" ? "same host (PostgreSQL)" : "sessionmux",
    kind: "mux",
    url: followOn === "A" ? a.wsUrl : b.wsUrl,
    token: BENCH_TOKEN,
    async prepare(sessionIds) {
      for (const sessionId of sessionIds) {
        const outcome = await a.store.create({ sessionId, owner: BENCH_OWNER, model: "demo" });
        if (outcome.status !== "created") throw new Error(`create ${sessionId}: ${outcome.status}`);
        ids.push(sessionId);
      }
    },
    async publish(index, events: readonly DeltaEvent[]) {
      const outcome = await a.store.append(ids[index]!, [...events]);
      if (outcome.status !== "appended") throw new Error(`append: ${outcome.status}`);
      return outcome.events.at(-1)!.seq;
    },
    openSockets: () => openConnections(followOn === "A" ? a : b),
    async close() {
      await b.close();
      await a.close();
      await dropSchema(url, schema);
    },
  };
}
