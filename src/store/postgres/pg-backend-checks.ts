import pg from "pg";
import { afterLoopTime } from "./loop-time.js";

/** What the server says of a backend a client waits on (see `BackendChecks`). */
export type Verdict = "alive" | "lost" | "unknown";

/** The asked backends as the server sees them, and how long each has been in its state. */
const BACKEND_STATES = `SELECT pid, state, (extract(epoch FROM clock_timestamp() - state_change) * 1000)::float8 AS "quietMs"
  FROM pg_stat_activity WHERE pid = ANY($1::int[])`;

const TERMINATE = "SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid";

// the server is not there, or is shutting down or starting up (57P01-57P03): a backend of it
// cannot still be running the statement a client waits on
const GONE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ETIMEDOUT",
  "EPIPE",
  "57P01",
  "57P02",
  "57P03",
]);
const isServerGone = (err: unknown): boolean => {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === "string") return GONE_CODES.has(code);
  return err instanceof Error && /connection terminated/i.test(err.message);
};

/**
 * Asks the server, on a connection of its own (`sessionmux-check`), about backends clients still
 * wait on. One question at a time, about every backend asked meanwhile, so a store whose every
 * connection waits (a migration holding a table) opens one more connection, not one per wait.
 *
 * Lost: the server does not answer within `withinMs` of the event loop's time (connect included,
 * see `afterLoopTime`), is not there, has no
 * such backend, or that backend has not been running a statement for `withinMs` or more: it
 * answered, or waits for the client's next bytes, and what it sent or what it waits for was lost
 * on the way. Such a backend is terminated, so it holds no lock past this. Alive: the backend runs
 * a statement, which is what a lock wait (another host's transaction, `rebuild-projections`
 * holding every head) or a slow statement looks like. Unknown: the server answered with an error
 * (a full connection table, a role refused), or shows no state (another role's backend).
 */
export class BackendChecks {
  private asked = new Map<number, Array<(verdict: Verdict) => void>>();
  private running = false;

  constructor(
    private readonly url: string,
    private readonly withinMs: number,
  ) {}

  /** The verdict on backend `pid`, at the latest after the question in flight and the next one. */
  ask(pid: number): Promise<Verdict> {
    return new Promise((resolve) => {
      const waiting = this.asked.get(pid) ?? [];
      waiting.push(resolve);
      this.asked.set(pid, waiting);
      if (!this.running) void this.run();
    });
  }

  private async run(): Promise<void> {
    this.running = true;
    while (this.asked.size > 0) {
      const asked = this.asked;
      this.asked = new Map();
      const verdicts = await this.question([...asked.keys()]);
      for (const [pid, waiting] of asked) for (const resolve of waiting) resolve(verdicts(pid));
    }
    this.running = false;
  }

  private async question(pids: number[]): Promise<(pid: number) => Verdict> {
    const probe = new pg.Client({ connectionString: this.url, application_name: "sessionmux-check" });
    probe.on("error", () => undefined);
    let cancel = (): void => undefined;
    let unanswered = false;
    const silent = new Promise<(pid: number) => Verdict>((resolve) => {
      cancel = afterLoopTime(this.withinMs, () => {
        unanswered = true;
        resolve(() => "lost");
      });
    });
    const answered = (async (): Promise<(pid: number) => Verdict> => {
      await probe.connect();
      const { rows } = await probe.query<{ pid: number; state: string | null; quietMs: number | null }>(
        BACKEND_STATES,
        [pids],
      );
      const verdicts = new Map<number, Verdict>(pids.map((pid) => [pid, "lost"]));
      for (const { pid, state, quietMs } of rows) {
        if (state === null || quietMs === null) verdicts.set(pid, "unknown");
        else if (state === "active" || quietMs < this.withinMs) verdicts.set(pid, "alive");
      }
      const lost = pids.filter((pid) => verdicts.get(pid) === "lost");
      if (lost.length > 0) await probe.query(TERMINATE, [lost]).catch(() => undefined);
      return (pid) => verdicts.get(pid) ?? "unknown";
    })().catch((err: unknown): ((pid: number) => Verdict) => {
      const verdict = isServerGone(err) ? "lost" : "unknown";
      return () => verdict;
    });
    const verdicts = await Promise.race([answered, silent]);
    cancel();
    // one left unanswered is on a silent path too: it is not ended politely
    if (unanswered) probe.connection.stream.destroy();
    else probe.end().catch(() => undefined);
    return verdicts;
  }
}
