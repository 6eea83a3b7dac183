import type pg from "pg";
import { afterLoopTime } from "./loop-time.js";

/**
 * How often a LISTEN connection is asked `SELECT 1`, and how long its answer may take before the
 * connection is counted lost: a silent connection is found within twice this.
 */
export const LISTEN_CHECK_MS = 5_000;

/**
 * TCP keepalive of every connection of the store (LISTEN and pooled): the first probe after this
 * long idle. The kernel's probe count and interval then decide (Linux: 9 × 75 s), so this is a
 * backstop for a connection no query is waiting on (keepalive probes only an idle socket);
 * `checkListening` is what bounds a silent LISTEN connection, `watchBackend` a silent writer.
 */
export const KEEPALIVE_IDLE_MS = 30_000;

/**
 * Asks `client`, a LISTEN connection, `SELECT 1` every `everyMs` (counted from the previous
 * answer) until it ends. A LISTEN connection only hears, so one whose network path went silent
 * (packets dropped, the server's machine gone without a reset, a NAT that forgot the flow) looks
 * alive for as long as TCP takes to give up, hours, while no NOTIFY reaches it. An answer that
 * does not come within `everyMs` destroys the socket: the client then ends with an error, as a
 * connection the server closed does, and its owner's reconnect (and re-read of what was missed)
 * runs as after any outage. Started as soon as the client is made (a query waits for the
 * connect), so a connect or LISTEN that hangs on a path still dead is ended the same way, once it
 * has taken twice `everyMs`.
 */
export function checkListening(client: pg.Client, everyMs: number): void {
  let timer: NodeJS.Timeout | undefined;
  let ended = false;
  const ask = () => {
    if (ended) return;
    // counted in the loop's time: a loop held past `everyMs` (mid-handshake, or while the answer
    // came) does not end a connection that answers once the loop runs again
    const silent = afterLoopTime(everyMs, () => ended || client.connection.stream.destroy());
    client.query("SELECT 1").then(
      () => {
        silent();
        next();
      },
      // the connection failed or was ended: its own `error` or `end` is the news, and nothing
      // more is asked of it
      () => {
        silent();
        ended = true;
      },
    );
  };
  const next = () => {
    if (ended) return;
    timer = setTimeout(ask, everyMs);
    timer.unref();
  };
  client.once("end", () => {
    ended = true;
    clearTimeout(timer);
  });
  next();
}
