import { type Command, InvalidArgumentError, Option } from "commander";
import { filter, firstValueFrom, of, type Subscription, timeout } from "rxjs";
import { SessionmuxError } from "../../protocol/index.js";
import { unsupportedProtocol } from "../client/host-frame-reader.js";
import {
  createNodeClient,
  createNodeSocketFactory,
  type SessionmuxClient,
  type WebSocketLike,
} from "../client/node.js";
import { integer } from "./cli-options.js";
import { jsonLine } from "./json-line.js";

const DEFAULT_URL = "ws://127.0.0.1:8787/api/remote.mux";

export interface ConnectOptions {
  url: string;
  token?: string;
  /** One-shot commands give up after this long without an answer; also bounds the first connect. */
  timeout: number;
}

/** Adds `--url`, `--token` and `--timeout`: what every client command needs to reach a host. */
export function withConnection(command: Command): Command {
  return command
    .addOption(
      new Option("--url <url>", "the host's address (http://…) or its mux (ws://…/api/remote.mux)")
        .env("SESSIONMUX_URL")
        .argParser(muxUrl)
        .default(DEFAULT_URL),
    )
    .addOption(new Option("--token <token>", "bearer token").env("SESSIONMUX_TOKEN"))
    .option(
      "--timeout <ms>",
      "give up when the host does not answer within this long: a one-shot command's answer, or a stream's (follow, control) first connection",
      integer("--timeout", 1),
      30_000,
    );
}

const MUX_PATH = "api/remote.mux";

/**
 * `--url`: the mux's WebSocket URL as given, or the host's own address as `serve` prints it
 * (`http://127.0.0.1:8787`, or under a base path `https://example.com/chat`), which names the mux
 * below it. Anything else (`localhost:8787`, parsed as the scheme `localhost:`) was retried until
 * `--timeout` and then reported as a host that did not answer.
 */
function muxUrl(value: string): string {
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (!url || !["ws:", "wss:", "http:", "https:"].includes(url.protocol) || url.hostname === "") {
    throw new InvalidArgumentError(
      `It must be a ws:// or wss:// URL, e.g. ${DEFAULT_URL}, or the host's http:// or https:// address`,
    );
  }
  if (url.protocol.startsWith("ws") || url.pathname.endsWith(`/${MUX_PATH}`)) return value;
  url.pathname = `${url.pathname.replace(/\/$/, "")}/${MUX_PATH}`;
  url.search = "";
  url.hash = "";
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  return url.href;
}

/** Socket failures that mean nothing is there to answer: retrying at once cannot help a script. */
const NOTHING_THERE: ReadonlySet<string | undefined> = new Set(["ECONNREFUSED", "ENOTFOUND"]);

/**
 * Connects and waits for the first `hello`, failing fast: nothing listening at the URL (the
 * connection refused), a refused token, a wrong path, a host of another protocol version
 * (terminal states) or the token's principal holding its most sockets (429: the host does not
 * free one for a command that waits) each end the command with a message saying what to check.
 * Other first failures (a cut, a slow host) are retried until `--timeout`; reconnects after a
 * first success stay silent.
 */
export async function connect(options: ConnectOptions): Promise<SessionmuxClient> {
  const token = options.token;
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
        (s) =>
          s.name !== "connecting" &&
          (s.name !== "backoff" || s.status === 429 || NOTHING_THERE.has(last?.failureCode)),
      ),
      timeout({ first: options.timeout, with: () => of(undefined) }),
    ),
  );
  if (first?.name === "open") return client;
  await client.close();
  if (first?.name === "incompatible") throw unsupportedProtocol(first.protocol);
  if (first === undefined) {
    throw new Error(`no answer from ${options.url} within ${options.timeout} ms; is the host healthy?`);
  }
  throw firstConnectError("status" in first ? first.status : undefined, options.url);
}

function firstConnectError(status: number | undefined, url: string): Error {
  if (status === 401 || status === 403) {
    return new SessionmuxError(
      status === 401 ? "unauthorized" : "forbidden_origin",
      `the host at ${url} refused the token (HTTP ${status}); check --token or SESSIONMUX_TOKEN`,
    );
  }
  if (status === 429) {
    return new SessionmuxError(
      "too_many_connections",
      `the host at ${url} allows this token's principal no more sockets (HTTP 429); close one of its other clients, or raise --max-sockets-per-principal on the host`,
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
export async function oneShot(
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

/**
 * Connects, then runs until the stream `start` opens ends, SIGINT/SIGTERM arrives, or a terminal
 * error (thrown for the caller to print). A reconnect the host refuses (a token rotated while the
 * host restarted, a path no longer served) is such an error: the client would wait for a
 * `setToken` a command line never makes, printing nothing.
 */
export async function streamUntilDone(
  options: ConnectOptions,
  start: (client: SessionmuxClient, finish: (error?: unknown) => void) => Subscription,
): Promise<void> {
  const client = await connect(options);
  return new Promise<void>((resolve, reject) => {
    let subscription: Subscription | undefined;
    let refusal: Subscription | undefined;
    let finished = false;
    const finish = (error?: unknown) => {
      if (finished) return;
      finished = true;
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
      refusal?.unsubscribe();
      subscription?.unsubscribe();
      void client.close().then(() => (error === undefined ? resolve() : reject(error)));
    };
    const onSignal = () => finish();
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    subscription = start(client, finish);
    if (finished) subscription.unsubscribe();
    refusal = client.state$.subscribe((state) => {
      if (state.name === "unauthorized" || state.name === "rejected") {
        finish(firstConnectError(state.status, options.url));
      }
    });
    if (finished) refusal.unsubscribe();
  });
}
