import { type Command, InvalidArgumentError, Option } from "commander";
import { filter, firstValueFrom, of, type Subscription, timeout } from "rxjs";
import { type SessionEvent, SessionmuxError } from "../../protocol/index.js";
import { controlMirror } from "../client/control-mirror.js";
import { followSession } from "../client/follow-session.js";
import {
  createNodeClient,
  createNodeSocketFactory,
  type SessionmuxClient,
  type WebSocketLike,
} from "../client/node.js";

const DEFAULT_URL = "ws://127.0.0.1:8787/api/remote.mux";

interface ConnectOptions {
  url: string;
  token?: string;
  /** One-shot commands give up after this long without an answer; also bounds the first connect. */
  timeout: number;
}

const integer = (name: string, min: number) => (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}`);
  return n;
};

/** JSON with `Uint8Array` as base64, so binary event data survives one line of text. */
export function jsonLine(value: unknown): string {
  return `${JSON.stringify(value, (_key, v: unknown) =>
    v instanceof Uint8Array ? Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64") : v,
  )}\n`;
}

/** One event as printed by `follow`: exactly `{"seq","type","at","data"}` in that order. */
export function eventLine(event: SessionEvent): string {
  return jsonLine({ seq: event.seq, type: event.type, at: event.at, data: event.data });
}

function withConnection(command: Command): Command {
  return command
    .option("--url <url>", "host WebSocket URL", DEFAULT_URL)
    .option("--token <token>", "bearer token (default: $SESSIONMUX_TOKEN)")
    .option("--timeout <ms>", "give up a one-shot command after this long", integer("--timeout", 1), 30_000);
}

/** Socket failures that mean nothing is there to answer: retrying at once cannot help a script. */
const NOTHING_THERE: ReadonlySet<string | undefined> = new Set(["ECONNREFUSED", "ENOTFOUND"]);

/**
 * Connects and waits for the first `hello`, failing fast: nothing listening at the URL (the
 * connection refused), a refused token or a wrong path (terminal states) each end the command
 * with a message saying what to check. Other first failures (a cut, a slow host) are retried
 * until `--timeout`; reconnects after a first success stay silent.
 */
async function connect(options: ConnectOptions): Promise<SessionmuxClient> {
  const token = options.token ?? process.env.SESSIONMUX_TOKEN;
  // A plain Error: the entry point prints its message (a CommanderError would exit silently).
  if (!token) throw new Error("missing token: pass --token or set SESSIONMUX_TOKEN");
  const nodeFactory = createNodeSocketFactory({ handshakeTimeoutMs: options.timeout });
  let last: WebSocketLike | undefined;
  const client = createNodeClient({
    url: options.url,
    token,
    callTimeoutMs: options.timeout,
    socketFactory: (url, secret) => {
      last = nodeFactory(url, secret);
      return last;
    },
  });
  const first = await firstValueFrom(
    client.state$.pipe(
      filter(
        (s) => s.name !== "connecting" && (s.name !== "backoff" || NOTHING_THERE.has(last?.failureCode)),
      ),
      timeout({ first: options.timeout, with: () => of(undefined) }),
    ),
  );
  if (first?.name === "open") return client;
  await client.close();
  if (first === undefined) {
    throw new Error(`no answer from ${options.url} within ${options.timeout} ms; is the host healthy?`);
  }
  throw firstConnectError(
    first.name === "unauthorized" || first.name === "rejected" ? first.status : undefined,
    options.url,
  );
}

function firstConnectError(status: number | undefined, url: string): Error {
  if (status === 401 || status === 403) {
    return new SessionmuxError(
      status === 401 ? "unauthorized" : "forbidden_origin",
      `the host at ${url} refused the token (HTTP ${status}); check --token or SESSIONMUX_TOKEN`,
    );
  }
  if (status === 404) {
    return new SessionmuxError(
      "not_found",
      `no sessionmux mux at ${url} (HTTP 404); the path is /api/remote.mux`,
    );
  }
  if (status !== undefined) {
    return new SessionmuxError("bad_request", `the host at ${url} refused the connection (HTTP ${status})`);
  }
  return new Error(`cannot reach a sessionmux host at ${url}; is \`sessionmux serve\` running there?`);
}

/** Runs one request, prints its result as one JSON line, and always closes the client. */
async function oneShot(
  options: ConnectOptions,
  run: (client: SessionmuxClient) => Promise<unknown>,
): Promise<void> {
  const client = await connect(options);
  try {
    // The client's call timeout (--timeout) settles the call with a `timeout` error.
    process.stdout.write(jsonLine(await run(client)));
  } finally {
    await client.close();
  }
}

/** Runs until the stream ends, SIGINT/SIGTERM arrives, or a terminal error (thrown for the caller to print). */
function untilDone(
  client: SessionmuxClient,
  start: (finish: (error?: unknown) => void) => Subscription,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let subscription: Subscription | undefined;
    let finished = false;
    const finish = (error?: unknown) => {
      if (finished) return;
      finished = true;
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
      subscription?.unsubscribe();
      void client.close().then(() => (error === undefined ? resolve() : reject(error)));
    };
    const onSignal = () => finish();
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    subscription = start(finish);
    if (finished) subscription.unsubscribe();
  });
}

interface FollowCliOptions extends ConnectOptions {
  after: number;
  epoch?: string;
  until?: number;
  onReset: "continue" | "exit";
}

/** Registers the scripted client commands: follow, prompt, list, page, control, create. */
export function registerClientCommands(program: Command): void {
  withConnection(program.command("follow <sessionId>"))
    .description(
      "print the session's events as JSON lines {seq,type,at,data}, resuming silently across disconnects. " +
        "After a history clear (reset) the new epoch's events print from seq 1 and a note goes to stderr",
    )
    .option("--after <seq>", "start after this seq", integer("--after", 0), 0)
    .option("--epoch <epoch>", "the epoch --after belongs to (a stale one replays from seq 1)")
    .option("--until <seq>", "exit 0 once this seq has been printed", integer("--until", 1))
    .addOption(
      new Option("--on-reset <policy>", "what to do when history is cleared")
        .choices(["continue", "exit"])
        .default("continue"),
    )
    .action(async (sessionId: string, options: FollowCliOptions) => {
      const client = await connect(options);
      await untilDone(client, (finish) =>
        followSession(client, sessionId, {
          afterSeq: options.after,
          ...(options.epoch !== undefined ? { epoch: options.epoch } : {}),
        }).subscribe({
          next: (update) => {
            if (update.kind === "reset") {
              process.stderr.write(`reset: history cleared, new epoch ${update.epoch}\n`);
              if (options.onReset === "exit") {
                process.exitCode = 3;
                finish();
              }
              return;
            }
            if (update.kind !== "events") return;
            for (const event of update.events) {
              process.stdout.write(eventLine(event));
              if (options.until !== undefined && event.seq >= options.until) return finish();
            }
          },
          error: (error: unknown) => finish(error),
          complete: () => finish(),
        }),
      );
    });

  withConnection(program.command("prompt <sessionId> <text>"))
    .description("send a prompt (exactly once, even across reconnects) and print the result")
    .option("--client-message-id <id>", "idempotency key (default: a fresh one)")
    .action((sessionId: string, text: string, options: ConnectOptions & { clientMessageId?: string }) =>
      oneShot(options, (client) =>
        client.prompt({
          sessionId,
          text,
          ...(options.clientMessageId !== undefined ? { clientMessageId: options.clientMessageId } : {}),
        }),
      ),
    );

  withConnection(program.command("list"))
    .description("print the session list, newest first")
    .option("--limit <n>", "how many rows", integer("--limit", 1))
    .option("--parked", "only sessions waiting on the operator")
    .option("--before <cursor>", "the `next` cursor of a previous page")
    .action((options: ConnectOptions & { limit?: number; parked?: boolean; before?: string }) =>
      oneShot(options, (client) =>
        client.list({
          ...(options.limit !== undefined ? { limit: options.limit } : {}),
          ...(options.parked ? { parked: true } : {}),
          ...(options.before !== undefined ? { before: options.before } : {}),
        }),
      ),
    );

  withConnection(program.command("page <sessionId>"))
    .description("print one page of a session's log (default: the tail)")
    .option("--after <seq>", "events after this seq", integer("--after", 0))
    .option("--before <seq>", "events before this seq", integer("--before", 1))
    .option("--limit <n>", "how many events", integer("--limit", 1))
    .action(
      (sessionId: string, options: ConnectOptions & { after?: number; before?: number; limit?: number }) =>
        oneShot(options, (client) =>
          client.page({
            sessionId,
            ...(options.after !== undefined ? { afterSeq: options.after } : {}),
            ...(options.before !== undefined ? { beforeSeq: options.before } : {}),
            ...(options.limit !== undefined ? { limit: options.limit } : {}),
          }),
        ),
    );

  withConnection(program.command("create"))
    .description("create a session and print its header")
    .option("--id <sessionId>", "session id (default: chosen by the host)")
    .option("--title <title>", "title")
    .option("--model <model>", "model")
    .action((options: ConnectOptions & { id?: string; title?: string; model?: string }) =>
      oneShot(options, (client) =>
        client.create({
          ...(options.id !== undefined ? { sessionId: options.id } : {}),
          ...(options.title !== undefined ? { title: options.title } : {}),
          ...(options.model !== undefined ? { model: options.model } : {}),
        }),
      ),
    );

  withConnection(program.command("control"))
    .description(
      "print every change of the live-state mirror as a JSON line (baseline, deltas, " +
        '{"kind":"stale"} while disconnected, {"kind":"generationChanged"} after a host restart)',
    )
    .action(async (options: ConnectOptions) => {
      const client = await connect(options);
      await untilDone(client, (finish) =>
        controlMirror(client).subscribe({
          next: (mirror) => {
            const change = mirror.lastChange;
            if (change === undefined) return;
            if (change.kind === "baseline" && mirror.generationChanged) {
              process.stdout.write(jsonLine({ kind: "generationChanged", generation: mirror.generation }));
            }
            process.stdout.write(jsonLine(change));
          },
          error: (error: unknown) => finish(error),
          complete: () => finish(),
        }),
      );
    });
}
