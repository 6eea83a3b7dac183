import pg from "pg";

/**
 * How often a transaction of the group commit still waiting on the database is checked from
 * another connection (see `watchBackend`): a writer connection whose path went silent is dropped
 * within twice this.
 */
export const WRITER_CHECK_MS = 5_000;

/** The watched backend as the server sees it, and how long it has been in that state. */
const BACKEND_STATE = `SELECT state, (extract(epoch FROM clock_timestamp() - state_change) * 1000)::float8 AS "quietMs"
  FROM pg_stat_activity WHERE pid = $1`;

type Verdict = "alive" | "lost" | "unknown";

// the server is not there, or is shutting down or starting up (57P01-57P03): a backend of it
// cannot still be running the writer's statement
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
 * Asks the server, on a connection of its own, about backend `pid`, which a client still waits on.
 * Lost: the server does not answer within `withinMs` (connect included), is not there, has no
 * such backend, or that backend has not been running a statement for `withinMs` or more: it
 * answered, or waits for the client's next bytes, and what it sent or what it waits for was lost
 * on the way. Such a backend is terminated, so it holds no lock past this. Alive: the backend runs
 * a statement, which is what a lock wait (another host's transaction, `rebuild-projections`
 * holding every head) or a slow statement looks like. Unknown: the server answered with an error
 * (a full connection table, a role refused).
 */
async function askAbout(url: string, pid: number, withinMs: number): Promise<Verdict> {
  const probe = new pg.Client({ connectionString: url, application_name: "sessionmux-check" });
  probe.on("error", () => undefined);
  let timer: NodeJS.Timeout | undefined;
  let unanswered = false;
  const silent = new Promise<Verdict>((resolve) => {
    timer = setTimeout(() => {
      unanswered = true;
      resolve("lost");
    }, withinMs);
    timer.unref();
  });
  const asked = (async (): Promise<Verdict> => {
    await probe.connect();
    const { rows } = await probe.query<{ state: string | null; quietMs: number | null }>(BACKEND_STATE, [
      pid,
    ]);
    const row = rows[0];
    if (!row) return "lost";
    // another role's backend shows no state: nothing to judge by
    if (row.state === null || row.quietMs === null) return "unknown";
    if (row.state === "active" || row.quietMs < withinMs) return "alive";
    await probe.query("SELECT pg_terminate_backend($1)", [pid]).catch(() => undefined);
    return "lost";
  })().catch((err: unknown) => (isServerGone(err) ? "lost" : "unknown"));
  const verdict = await Promise.race([asked, silent]);
  clearTimeout(timer);
  // one left unanswered is on a silent path too: it is not ended politely
  if (unanswered) probe.connection.stream.destroy();
  else probe.end().catch(() => undefined);
  return verdict;
}

/**
 * Watches `client`, a writer connection, while a transaction runs on it: every `everyMs` the
 * server is asked on another connection what the client's backend does (see `askAbout`), and a
 * backend found lost has the client's socket destroyed: the statement waiting on it fails as on a
 * connection the server closed, instead of waiting for the kernel to give up retransmitting
 * (about 15 minutes on Linux). A deadline on the statement itself would be no bound here: a write
 * may wait on another transaction's row locks for as long as it holds them, and a healthy
 * connection cut then would turn a lock wait into failed writes; the server can tell a lock wait
 * (the backend runs) from a lost connection (it does not), the client alone cannot. Returns the
 * function that stops watching, to be called before the connection goes back to its pool.
 */
export function watchBackend(client: pg.Client, url: string, everyMs: number): () => void {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const check = async () => {
    // set by the server's BackendKeyData, which the pg types leave out
    const pid = (client as pg.Client & { processID: number | null }).processID;
    const verdict = pid === null ? "unknown" : await askAbout(url, pid, everyMs);
    if (stopped) return;
    if (verdict === "lost") client.connection.stream.destroy();
    else next();
  };
  const next = () => {
    timer = setTimeout(check, everyMs);
    timer.unref();
  };
  next();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
