import { readFileSync } from "node:fs";
import { type Command, Option } from "commander";
import { AGENT_NAMES, type AgentName, createAgent } from "../agents/registry.js";
import type { AuthenticateRequest } from "../embed/app-authentication.js";
import { prepareDatabasePath } from "../operations/database-path.js";
import { type DatabaseTarget, databaseTarget, describeTarget } from "../operations/database-target.js";
import { hostIdOf } from "../operations/host-id.js";
import { keptTokenAuthenticate } from "../operations/kept-token-auth.js";
import { keptTokenFile } from "../operations/kept-token-location.js";
import { LIMIT_FLOORS } from "../operations/limit-floors.js";
import { LONGEST_TIMER_MS } from "../operations/longest-timer.js";
import { StartupError } from "../operations/startup-error.js";
import { readOrCreateToken } from "../operations/token-file.js";
import { startHost } from "../server.js";
import { LONGEST_QUERY_CHECK_MS, QUERY_CHECK_MS } from "../store/postgres/pg-backend-watch.js";
import { LISTEN_CHECK_MS } from "../store/postgres/pg-listen-check.js";
import {
  checkTokenSpecs,
  metricsTokenProblem,
  originProblem,
  parseTokenSpec,
  type TokenSpec,
} from "../transport/auth.js";
import { collectList, dataDirOption, dbOption, dbSchemaOption, integer } from "./cli-options.js";
import { addLimitOptions, type LimitValues, mountedLimitsOf } from "./limit-options.js";
import { createLogger } from "./logger.js";

interface ServeOptions extends LimitValues {
  host: string;
  port: number;
  db: string;
  dbSchema?: string;
  dbPoolSize: number;
  dbListenCheckMs: number;
  dbQueryCheckMs: number;
  dataDir: string;
  hostId?: string;
  leaseTtlMs: number;
  createDbFolder?: boolean;
  token: string[];
  tokensFile?: string;
  agent: AgentName;
  idleDetachMs: number;
  pingIntervalMs: number;
  allowedOrigin: string[];
  logLevel: string;
}

/** pino's levels: another name failed deep inside pino with "default level:… must be included in custom levels". */
const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

type Authentication =
  | { tokens: TokenSpec[] }
  | { tokens: []; authenticate: AuthenticateRequest; kept: { token: string; file: string } };

/**
 * Tokens from `--token` (repeatable) and `--tokens-file` (one `name=secret` or bare admin token
 * per line); without either, the admin token kept beside the database, or in `--data-dir` for
 * PostgreSQL (minted on first start, re-read when `token rotate` replaces it).
 */
function authenticationOf(options: ServeOptions, keptFile: () => string): Authentication {
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
    specs.push(...tokensFileSpecs(options.tokensFile, text));
  }
  if (specs.length > 0) {
    // named as the flags gave them, before the host's own check names them by their index
    try {
      checkTokenSpecs(specs);
    } catch (err) {
      throw new StartupError("option_invalid", (err as Error).message);
    }
    return { tokens: specs };
  }
  const file = keptFile();
  const { token } = readOrCreateToken(file);
  return { tokens: [], authenticate: keptTokenAuthenticate(file), kept: { token, file } };
}

/**
 * The entries of a tokens file, each checked on its own so a refusal names its line. A file that
 * lists none is refused: the host would otherwise fall back to a kept admin token of its own, so
 * one host of several behind a balancer (its file left empty by a failed deploy) would refuse
 * every client the others take, and print a token nobody configured.
 */
function tokensFileSpecs(file: string, text: string): TokenSpec[] {
  const specs: TokenSpec[] = [];
  for (const [index, line] of text.split(/\r?\n/).entries()) {
    const trimmed = line.trim();
    if (!trimmed || trimmed.startsWith("#")) continue;
    const spec = parseTokenSpec(trimmed);
    try {
      checkTokenSpecs([spec]);
    } catch (err) {
      throw new StartupError(
        "tokens_file_invalid",
        `--tokens-file ${file} line ${index + 1}: ${(err as Error).message.replace(/^--token /, "")}`,
      );
    }
    specs.push(spec);
  }
  if (specs.length === 0) {
    throw new StartupError(
      "tokens_file_invalid",
      `--tokens-file ${file} lists no token (one name=secret or bare admin token per line)`,
    );
  }
  return specs;
}

/**
 * `--allowed-origin` and `--metrics-token` refused by their flags' names before anything is made
 * (the host's own check names them as `createSessionmux` options). Returns the metrics token to
 * use: an empty one, as an empty `SESSIONMUX_METRICS_TOKEN` gives, is none.
 */
function accessFlagsChecked(options: ServeOptions): string | undefined {
  for (const origin of options.allowedOrigin) {
    const problem = originProblem(origin);
    if (problem) throw new StartupError("option_invalid", `--allowed-origin: ${problem}`);
  }
  if (options.metricsToken === undefined || options.metricsToken === "") return undefined;
  // compared with the principals' tokens once the tokens file is read
  const problem = metricsTokenProblem(options.metricsToken, []);
  if (problem) throw new StartupError("option_invalid", `--metrics-token: ${problem}`);
  return options.metricsToken;
}

/**
 * `--create-db-folder`, or its variable read as a switch: commander turns a flag on for any value
 * of its variable, so `SESSIONMUX_CREATE_DB_FOLDER=0` created a misspelled path's folder.
 */
function createDbFolderOf(options: ServeOptions, command: Command): boolean {
  if (command.getOptionValueSource("createDbFolder") !== "env") return options.createDbFolder === true;
  const value = (process.env.SESSIONMUX_CREATE_DB_FOLDER ?? "").trim().toLowerCase();
  if (value === "1" || value === "true") return true;
  if (value === "0" || value === "false" || value === "") return false;
  return command.error(
    `error: SESSIONMUX_CREATE_DB_FOLDER must be 1 or true (on), 0, false or empty (off), got ${JSON.stringify(process.env.SESSIONMUX_CREATE_DB_FOLDER)}`,
  );
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
        // checked here: Node's own refusal came after the database was opened, naming options.port
        .argParser(integer("--port", 0, 65_535))
        .default(8787),
    )
    .addOption(dbOption())
    .addOption(dbSchemaOption())
    .addOption(
      new Option("--db-pool-size <n>", "PostgreSQL connections this host's store pools (one more listens)")
        .env("SESSIONMUX_DB_POOL_SIZE")
        .argParser(integer("--db-pool-size", 2))
        .default(10),
    )
    .addOption(
      new Option(
        "--db-listen-check-ms <ms>",
        "PostgreSQL: how often each LISTEN connection is asked SELECT 1 (counted from its last answer), and how long the answer may take before the connection is dropped and reconnected: one gone silent is dropped within twice this",
      )
        .env("SESSIONMUX_DB_LISTEN_CHECK_MS")
        .argParser(integer("--db-listen-check-ms", LIMIT_FLOORS.dbCheckMs, LONGEST_TIMER_MS))
        .default(LISTEN_CHECK_MS),
    )
    .addOption(
      new Option(
        "--db-query-check-ms <ms>",
        "PostgreSQL: how often a statement still waiting is checked from another connection; one whose connection went silent fails within 2-3 times this, a handshake within 2 times",
      )
        .env("SESSIONMUX_DB_QUERY_CHECK_MS")
        .argParser(integer("--db-query-check-ms", LIMIT_FLOORS.dbCheckMs, LONGEST_QUERY_CHECK_MS))
        .default(QUERY_CHECK_MS),
    )
    .addOption(dataDirOption())
    .addOption(
      new Option("--host-id <id>", "names this host among several on one database (default: generated)").env(
        "SESSIONMUX_HOST_ID",
      ),
    )
    .addOption(
      new Option(
        "--lease-ttl-ms <ms>",
        "how long a host owns a session's agent without renewing; past it another host takes over",
      )
        .env("SESSIONMUX_LEASE_TTL_MS")
        .argParser(integer("--lease-ttl-ms", 100, LONGEST_TIMER_MS))
        .default(10_000),
    )
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
        .argParser(integer("--idle-detach-ms", 1, LONGEST_TIMER_MS))
        .default(600_000),
    )
    .addOption(
      new Option("--ping-interval-ms <ms>", "WebSocket ping interval")
        .env("SESSIONMUX_PING_INTERVAL_MS")
        .argParser(integer("--ping-interval-ms", 10, LONGEST_TIMER_MS))
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
      new Option("--log-level <level>", "pino log level")
        .choices(LOG_LEVELS)
        .env("SESSIONMUX_LOG_LEVEL")
        .default("info"),
    );
  addLimitOptions(serve).action(async (options: ServeOptions, command: Command) => {
    const createDbFolder = createDbFolderOf(options, command);
    const logger = createLogger(options.logLevel);
    const target = databaseTarget(options.db, options.dbSchema);
    const hostId = hostIdOf(options.hostId);
    // before any folder, database or token file is made: a refused agent leaves nothing behind
    const agent = createAgent(options.agent);
    const metricsToken = accessFlagsChecked(options);
    // the default location is created on first start; a path given by hand must exist
    const createFolder = (option: string) =>
      createDbFolder || command.getOptionValueSource(option) === "default";
    const db =
      target.kind === "sqlite"
        ? prepareDatabasePath(target.path, { createFolder: createFolder("db") })
        : target.url;
    const located: DatabaseTarget = target.kind === "sqlite" ? { kind: "sqlite", path: db } : target;
    const authentication = authenticationOf(options, () =>
      keptTokenFile(located, options.dataDir, { createFolder: createFolder("dataDir") }),
    );
    if (metricsToken !== undefined && authentication.tokens.some((t) => t.secret === metricsToken))
      throw new StartupError(
        "option_invalid",
        "--metrics-token: it must differ from every principal's token",
      );
    const kept = "kept" in authentication ? authentication.kept : undefined;
    const limits = mountedLimitsOf(options);
    const running = await startHost({
      tokens: authentication.tokens,
      ...("authenticate" in authentication ? { authenticate: authentication.authenticate } : {}),
      host: options.host,
      port: options.port,
      dbPath: db,
      ...(target.kind === "postgres"
        ? {
            dbSchema: target.schema,
            dbPoolSize: options.dbPoolSize,
            dbListenCheckMs: options.dbListenCheckMs,
            dbQueryCheckMs: options.dbQueryCheckMs,
            callInbox: limits.callInbox,
          }
        : {}),
      hostId,
      leaseTtlMs: options.leaseTtlMs,
      agent,
      idleDetachMs: options.idleDetachMs,
      maxTurnAttachmentBytes: limits.maxTurnAttachmentBytes,
      allowedOrigins: options.allowedOrigin,
      logger,
      processMetrics: true,
      mux: { pingIntervalMs: options.pingIntervalMs, ...limits.mux },
      http: limits.http,
      uploadTtlMs: limits.uploadTtlMs,
      principals: limits.principals,
      ...(metricsToken === undefined ? {} : { metricsToken }),
    });
    // one write, so a reader that stops at the console line has the whole banner
    const banner = [`listening on ${running.url}`, `host id ${running.hostId}`];
    if (kept) {
      banner.push(`token kept in ${kept.file} (sessionmux token rotate replaces it)`);
      banner.push(`console: ${running.url}/#token=${kept.token}`);
    } else banner.push(`console: ${running.url}/ (append #token=<your token>)`);
    process.stdout.write(`${banner.join("\n")}\n`);
    // the process's own lines name the host as the host's do, so hosts sharing a collector part
    const hostLogger = logger.child({ hostId: running.hostId });
    hostLogger.info(
      {
        url: running.url,
        db: describeTarget(located),
        agent: options.agent,
        generation: running.host.generation,
      },
      "host ready",
    );
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      hostLogger.info({ signal }, "shutting down");
      running.close().then(
        () => {
          logger.flush();
          process.exit(0);
        },
        (err: unknown) => {
          hostLogger.error({ err }, "shutdown failed");
          logger.flush();
          process.exit(1);
        },
      );
    };
    process.on("SIGTERM", () => stop("SIGTERM"));
    process.on("SIGINT", () => stop("SIGINT"));
  });
}
