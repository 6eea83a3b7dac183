import { StartupError } from "../operations/startup-error.js";
import { checkTokenSpecs, metricsTokenProblem, originProblem, type TokenSpec } from "../transport/auth.js";
import type { SessionmuxOptions } from "./create-sessionmux.js";
import { describeOptionValue } from "./option-value.js";

/**
 * Every option `createSessionmux` reads. A name outside it is refused: a misspelt `basepath` or
 * `authenticte` was ignored, so the host mounted at the root or refused every request with a
 * message about tokens the app never meant to configure.
 */
const KNOWN: Record<keyof SessionmuxOptions, true> = {
  db: true,
  createDbFolder: true,
  dbSchema: true,
  dbPoolSize: true,
  dbListenCheckMs: true,
  dbQueryCheckMs: true,
  hostId: true,
  leaseTtlMs: true,
  callInbox: true,
  agent: true,
  tokens: true,
  authenticate: true,
  authenticateLimits: true,
  cors: true,
  basePath: true,
  idleDetachMs: true,
  turnStopGraceMs: true,
  maxTurnAttachmentBytes: true,
  logger: true,
  mux: true,
  http: true,
  processMetrics: true,
  readinessIntervalMs: true,
  metricsToken: true,
  principals: true,
  uploadTtlMs: true,
};

/**
 * Refuses options of the wrong name or kind before anything opens, each with a `StartupError`
 * coded `option_invalid` that names the option and says what it takes: without it a missing
 * `db`, a `cors` string or an agent class surfaced as a TypeError from deep inside (or, for the
 * agent, as `internal_error` on the first call of every client).
 */
export function checkOptionShape(options: SessionmuxOptions): void {
  if (options === null || typeof options !== "object") {
    throw invalid(`createSessionmux takes an options object, got ${describeOptionValue(options)}`);
  }
  const given: Record<string, unknown> = { ...options };
  const unknown = Object.keys(given).filter((name) => !Object.hasOwn(KNOWN, name));
  if (unknown.length > 0) {
    throw invalid(
      `unknown option${unknown.length > 1 ? "s" : ""} ${unknown.join(", ")}; createSessionmux takes ${Object.keys(KNOWN).join(", ")}`,
    );
  }
  if (typeof given.db !== "string" || given.db === "") {
    throw invalid(`db must be a SQLite file path or a postgres:// URL, got ${describeOptionValue(given.db)}`);
  }
  checkAuthentication(given);
  checkAgent(given.agent);
  if (given.cors !== undefined && !isStringArray(given.cors)) {
    throw invalid(
      `cors must be an array of origins such as ["https://app.example.com"], got ${describeOptionValue(given.cors)}`,
    );
  }
  for (const name of ["dbSchema", "hostId", "basePath", "metricsToken"] as const) {
    if (given[name] !== undefined && typeof given[name] !== "string") {
      throw invalid(`${name} must be a string, got ${describeOptionValue(given[name])}`);
    }
  }
  for (const [index, origin] of ((given.cors as string[] | undefined) ?? []).entries()) {
    const problem = originProblem(origin);
    if (problem) throw invalid(`cors[${index}]: ${problem}`);
  }
  if (typeof given.metricsToken === "string") {
    const problem = metricsTokenProblem(given.metricsToken, (given.tokens as TokenSpec[] | undefined) ?? []);
    // the token itself is not quoted: it is a secret
    if (problem) throw invalid(`metricsToken: ${problem}`);
  }
  for (const name of ["createDbFolder", "processMetrics"] as const) {
    if (given[name] !== undefined && typeof given[name] !== "boolean") {
      throw invalid(`${name} must be true or false, got ${describeOptionValue(given[name])}`);
    }
  }
  const logger = given.logger as Record<string, unknown> | undefined | null;
  if (
    logger !== undefined &&
    (logger === null ||
      typeof logger !== "object" ||
      !["child", "error", "warn", "info", "debug"].every((method) => typeof logger[method] === "function"))
  ) {
    throw invalid(
      `logger must be a pino logger (pino() or one of its children), got ${describeOptionValue(logger)}`,
    );
  }
}

function checkAuthentication(given: Record<string, unknown>): void {
  const { authenticate, tokens } = given;
  if (authenticate !== undefined && typeof authenticate !== "function") {
    throw invalid(
      `authenticate must be a function (request) => principal | undefined, got ${describeOptionValue(authenticate)}`,
    );
  }
  if (tokens !== undefined) {
    if (!Array.isArray(tokens)) {
      throw invalid(`tokens must be an array of { name, secret, admin }, got ${describeOptionValue(tokens)}`);
    }
    tokens.forEach((token: unknown, index) => {
      const entry = token as { name?: unknown; secret?: unknown; admin?: unknown } | null;
      if (
        entry === null ||
        typeof entry !== "object" ||
        typeof entry.name !== "string" ||
        typeof entry.secret !== "string" ||
        (entry.admin !== undefined && typeof entry.admin !== "boolean")
      ) {
        throw invalid(
          // the entry itself is not quoted: it holds a secret
          `tokens[${index}] must be { name: string, secret: string, admin: boolean }, got ${kindOf(token)}`,
        );
      }
    });
  }
  if (authenticate === undefined && (tokens === undefined || (tokens as unknown[]).length === 0)) {
    throw invalid(
      "createSessionmux needs authenticate (your own auth: (request) => principal | undefined) or tokens ([{ name, secret, admin }])",
    );
  }
  if (authenticate !== undefined && tokens !== undefined && (tokens as unknown[]).length > 0) {
    // the token list was dropped without a word: a service's token beside the app's own users
    // was refused 401, as if mistyped
    throw invalid(
      "tokens are not read when authenticate is given (it decides every request): look your tokens up in authenticate, with bearerToken(request), or leave authenticate out",
    );
  }
  if (tokens !== undefined && (tokens as unknown[]).length > 0) {
    try {
      checkTokenSpecs(tokens as never, (_, index) => `tokens[${index}]`);
    } catch (err) {
      throw invalid((err as Error).message);
    }
  }
}

/** The members of `AgentDriver` the host calls; an agent missing one failed every session's first call. */
function checkAgent(agent: unknown): void {
  if (agent === undefined) return;
  if (typeof agent === "function") {
    throw invalid(
      `agent must be an AgentDriver instance, got the class or function ${agent.name || "(anonymous)"}: pass new ${agent.name || "YourAgent"}()`,
    );
  }
  if (agent === null || typeof agent !== "object") {
    throw invalid(`agent must be an AgentDriver instance, got ${describeOptionValue(agent)}`);
  }
  const driver = agent as Record<string, unknown>;
  const missing = [
    ...(["name", "defaultModel"] as const).filter((member) => typeof driver[member] !== "string"),
    ...(["models", "runTurn"] as const).filter((member) => typeof driver[member] !== "function"),
    ...(["continueTurn", "close"] as const).filter(
      (member) => driver[member] !== undefined && typeof driver[member] !== "function",
    ),
  ];
  if (missing.length > 0) {
    throw invalid(
      `agent does not implement AgentDriver: ${missing.join(", ")} ${missing.length > 1 ? "are" : "is"} missing or of the wrong kind (name and defaultModel strings; models(), runTurn() and the optional continueTurn(), close() methods)`,
    );
  }
}

const isStringArray = (value: unknown): boolean =>
  Array.isArray(value) && value.every((item) => typeof item === "string");

function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value !== "object") return `a ${typeof value}`;
  const entry = value as Record<string, unknown>;
  return `{ ${Object.keys(entry)
    .map((key) => `${key}: ${typeof entry[key]}`)
    .join(", ")} }`;
}

const invalid = (message: string): StartupError => new StartupError("option_invalid", message);
