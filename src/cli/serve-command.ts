import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { type Command, InvalidArgumentError, Option } from "commander";
import { createAgent } from "../agents/registry.js";
import { startHost } from "../server.js";
import { parseTokenSpec, type TokenSpec } from "../transport/auth.js";
import {
  addLimitOptions,
  type LimitValues,
  muxLimitsOf,
  principalLimitsOf,
  uploadLimitsOf,
} from "./limit-options.js";
import { createLogger } from "./logger.js";

interface ServeOptions extends LimitValues {
  host: string;
  port: number;
  db: string;
  token: string[];
  tokensFile?: string;
  agent: "demo" | "openai";
  idleDetachMs: number;
  pingIntervalMs: number;
  allowedOrigin: string[];
  logLevel: string;
}

const integer = (name: string, min: number) => (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}`);
  return n;
};
const collect = (value: string, previous: string[]) => [...previous, value];

/** Tokens from `--token` (repeatable) and `--tokens-file` (one `name=secret` or bare admin token per line). */
function tokensOf(options: ServeOptions): { tokens: TokenSpec[]; generated?: string } {
  const specs = options.token.map(parseTokenSpec);
  if (options.tokensFile) {
    for (const line of readFileSync(options.tokensFile, "utf8").split(/\r?\n/)) {
      const trimmed = line.trim();
      if (trimmed && !trimmed.startsWith("#")) specs.push(parseTokenSpec(trimmed));
    }
  }
  if (specs.length > 0) return { tokens: specs };
  // Like Jupyter: without a configured token, mint one and print a console URL that carries it.
  const generated = randomBytes(24).toString("base64url");
  return { tokens: [{ name: "admin", secret: generated, admin: true }], generated };
}

export function registerServeCommand(program: Command): void {
  const serve = program
    .command("serve")
    .description("run the host: durable log, WebSocket mux, HTTP routes and the console")
    .option("--host <address>", "address to listen on", "127.0.0.1")
    .option("--port <port>", "port to listen on (0 picks a free one)", integer("--port", 0), 8787)
    .option("--db <file>", "SQLite database file", "./data/sessions.db")
    .option("--token <token>", "bearer token: T (admin) or name=secret (repeatable)", collect, [])
    .option("--tokens-file <file>", "file with one token spec per line")
    .addOption(new Option("--agent <name>", "agent driver").choices(["demo", "openai"]).default("demo"))
    .option(
      "--idle-detach-ms <ms>",
      "detach idle agents after this long",
      integer("--idle-detach-ms", 1),
      600_000,
    )
    .option("--ping-interval-ms <ms>", "WebSocket ping interval", integer("--ping-interval-ms", 10), 15_000)
    .option("--allowed-origin <origin>", "extra allowed Origin (repeatable)", collect, [])
    .option("--log-level <level>", "pino log level", "info");
  addLimitOptions(serve).action(async (options: ServeOptions) => {
    const logger = createLogger(options.logLevel);
    const { tokens, generated } = tokensOf(options);
    const running = await startHost({
      host: options.host,
      port: options.port,
      dbPath: resolve(options.db),
      tokens,
      agent: createAgent(options.agent),
      idleDetachMs: options.idleDetachMs,
      allowedOrigins: options.allowedOrigin,
      logger,
      mux: { pingIntervalMs: options.pingIntervalMs, ...muxLimitsOf(options) },
      http: uploadLimitsOf(options),
      uploadTtlMs: options.uploadTtlMs,
      principals: principalLimitsOf(options),
      ...(options.metricsToken === undefined ? {} : { metricsToken: options.metricsToken }),
    });
    process.stdout.write(`listening on ${running.url}\n`);
    if (generated) process.stdout.write(`console: ${running.url}/#token=${generated}\n`);
    else process.stdout.write(`console: ${running.url}/ (append #token=<your token>)\n`);
    logger.info(
      { url: running.url, db: options.db, agent: options.agent, generation: running.host.generation },
      "host ready",
    );

    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, "shutting down");
      running.close().then(
        () => {
          logger.flush();
          process.exit(0);
        },
        (err: unknown) => {
          logger.error({ err }, "shutdown failed");
          process.exit(1);
        },
      );
    };
    process.on("SIGTERM", () => stop("SIGTERM"));
    process.on("SIGINT", () => stop("SIGINT"));
  });
}
