import { readFileSync } from "node:fs";
import { type Command, Option } from "commander";
import { AGENT_NAMES, type AgentName, createAgent } from "../agents/registry.js";
import type { AuthenticateRequest } from "../embed/app-authentication.js";
import { prepareDatabasePath } from "../operations/database-path.js";
import { keptTokenAuthenticate } from "../operations/kept-token-auth.js";
import { StartupError } from "../operations/startup-error.js";
import { readOrCreateToken, tokenFilePath } from "../operations/token-file.js";
import { startHost } from "../server.js";
import { parseTokenSpec, type TokenSpec } from "../transport/auth.js";
import { collectList, dbOption, integer } from "./cli-options.js";
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
  createDbFolder?: boolean;
  token: string[];
  tokensFile?: string;
  agent: AgentName;
  idleDetachMs: number;
  pingIntervalMs: number;
  allowedOrigin: string[];
  logLevel: string;
}

type Authentication =
  | { tokens: TokenSpec[] }
  | { tokens: []; authenticate: AuthenticateRequest; kept: { token: string; file: string } };

/**
 * Tokens from `--token` (repeatable) and `--tokens-file` (one `name=secret` or bare admin token
 * per line); without either, the admin token kept beside the database (minted on first start,
 * re-read when `token rotate` replaces it).
 */
function authenticationOf(options: ServeOptions, dbFile: string): Authentication {
  const specs = options.token.map(parseTokenSpec);
  if (options.tokensFile) {
    let text: string;
    try {
      text = readFileSync(options.tokensFile, "utf8");
    } catch (err) {
      throw new StartupError(
        "token_file_unreadable",
        `cannot read --tokens-file ${options.tokensFile}: ${(err as Error).message}`,
        { cause: err },
      );
    }
    for (const line of text.split(/\r?\n/)) {
      const trimmed = line.trim();
      if (trimmed && !trimmed.startsWith("#")) specs.push(parseTokenSpec(trimmed));
    }
  }
  if (specs.length > 0) return { tokens: specs };
  const file = tokenFilePath(dbFile);
  const { token } = readOrCreateToken(file);
  return { tokens: [], authenticate: keptTokenAuthenticate(file), kept: { token, file } };
}

/** Every flag also reads an environment variable, named in `--help`. */
export function registerServeCommand(program: Command): void {
  const serve = program
    .command("serve")
    .description("run the host: durable log, WebSocket mux, HTTP routes and the console")
    .addOption(
      new Option("--host <address>", "address to listen on").env("SESSIONMUX_HOST").default("127.0.0.1"),
    )
    .addOption(
      new Option("--port <port>", "port to listen on (0 picks a free one)")
        .env("SESSIONMUX_PORT")
        .argParser(integer("--port", 0))
        .default(8787),
    )
    .addOption(dbOption())
    .addOption(
      new Option(
        "--create-db-folder",
        "create the database folder if missing (default: only for the default --db)",
      ).env("SESSIONMUX_CREATE_DB_FOLDER"),
    )
    .addOption(
      new Option("--token <token>", "bearer token: T (admin) or name=secret (repeatable, or comma-separated)")
        .env("SESSIONMUX_TOKEN")
        .argParser(collectList)
        .default([]),
    )
    .addOption(
      new Option("--tokens-file <file>", "file with one token spec per line").env("SESSIONMUX_TOKENS_FILE"),
    )
    .addOption(
      new Option("--agent <name>", "agent driver")
        .choices(AGENT_NAMES)
        .env("SESSIONMUX_AGENT")
        .default("demo"),
    )
    .addOption(
      new Option("--idle-detach-ms <ms>", "detach idle agents after this long")
        .env("SESSIONMUX_IDLE_DETACH_MS")
        .argParser(integer("--idle-detach-ms", 1))
        .default(600_000),
    )
    .addOption(
      new Option("--ping-interval-ms <ms>", "WebSocket ping interval")
        .env("SESSIONMUX_PING_INTERVAL_MS")
        .argParser(integer("--ping-interval-ms", 10))
        .default(15_000),
    )
    .addOption(
      new Option(
        "--allowed-origin <origin>",
        "extra allowed Origin, also for CORS (repeatable, or comma-separated)",
      )
        .env("SESSIONMUX_ALLOWED_ORIGINS")
        .argParser(collectList)
        .default([]),
    )
    .addOption(
      new Option("--log-level <level>", "pino log level").env("SESSIONMUX_LOG_LEVEL").default("info"),
    );
  addLimitOptions(serve).action(async (options: ServeOptions, command: Command) => {
    const logger = createLogger(options.logLevel);
    // the default location is created on first start; a path given by hand must exist
    const dbFile = prepareDatabasePath(options.db, {
      createFolder: options.createDbFolder === true || command.getOptionValueSource("db") === "default",
    });
    const authentication = authenticationOf(options, dbFile);
    const kept = "kept" in authentication ? authentication.kept : undefined;
    const running = await startHost({
      tokens: authentication.tokens,
      ...("authenticate" in authentication ? { authenticate: authentication.authenticate } : {}),
      host: options.host,
      port: options.port,
      dbPath: dbFile,
      agent: createAgent(options.agent),
      idleDetachMs: options.idleDetachMs,
      allowedOrigins: options.allowedOrigin,
      logger,
      processMetrics: true,
      mux: { pingIntervalMs: options.pingIntervalMs, ...muxLimitsOf(options) },
      http: uploadLimitsOf(options),
      uploadTtlMs: options.uploadTtlMs,
      principals: principalLimitsOf(options),
      ...(options.metricsToken === undefined ? {} : { metricsToken: options.metricsToken }),
    });
    // one write, so a reader that stops at the console line has the whole banner
    const banner = [`listening on ${running.url}`];
    if (kept) {
      banner.push(`token kept in ${kept.file} (sessionmux token rotate replaces it)`);
      banner.push(`console: ${running.url}/#token=${kept.token}`);
    } else banner.push(`console: ${running.url}/ (append #token=<your token>)`);
    process.stdout.write(`${banner.join("\n")}\n`);
    logger.info(
      { url: running.url, db: dbFile, agent: options.agent, generation: running.host.generation },
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
          logger.flush();
          process.exit(1);
        },
      );
    };
    process.on("SIGTERM", () => stop("SIGTERM"));
    process.on("SIGINT", () => stop("SIGINT"));
  });
}
