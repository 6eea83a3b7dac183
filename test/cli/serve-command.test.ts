import { randomBytes } from "node:crypto";
import { once } from "node:events";
import fs, { existsSync, readFileSync, writeFileSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { Command, CommanderError } from "commander";
import pg from "pg";
import { beforeEach, describe, expect, inject, it, vi } from "vitest";
import { registerServeCommand } from "../../src/cli/serve-command.js";
import { SessionHost } from "../../src/host/session-host.js";
import { StartupError } from "../../src/operations/startup-error.js";
import { MuxPeer } from "../support/mux-peer.js";
import { commanderRefusal } from "./commander-refusal.js";
import { commandCleanups, parseServe, quietProgram } from "./in-process-command.js";

/**
 * `sessionmux serve` run in this process: its flags parsed, its host started on a free port with a
 * SQLite file in a temp folder (or PostgreSQL), its banner read from stdout, its log from stderr,
 * its SIGTERM and SIGINT handlers called as the signals would, `process.exit` recorded.
 */

const pgUrl = inject("pgUrl");

/** The `serve` rows of the README's variable table: variable, flag, default (as parsed). */
const SERVE_FLAGS = [
  { env: "SESSIONMUX_HOST", flag: "--host", key: "host", fallback: "127.0.0.1", value: "10.0.0.1" },
  { env: "SESSIONMUX_PORT", flag: "--port", key: "port", fallback: 8787, value: 9000 },
  { env: "SESSIONMUX_DB_POOL_SIZE", flag: "--db-pool-size", key: "dbPoolSize", fallback: 10, value: 3 },
  {
    env: "SESSIONMUX_DB_LISTEN_CHECK_MS",
    flag: "--db-listen-check-ms",
    key: "dbListenCheckMs",
    fallback: 5000,
    value: 1000,
  },
  {
    env: "SESSIONMUX_DB_QUERY_CHECK_MS",
    flag: "--db-query-check-ms",
    key: "dbQueryCheckMs",
    fallback: 5000,
    value: 2000,
  },
  { env: "SESSIONMUX_HOST_ID", flag: "--host-id", key: "hostId", fallback: undefined, value: "edge-1" },
  {
    env: "SESSIONMUX_LEASE_TTL_MS",
    flag: "--lease-ttl-ms",
    key: "leaseTtlMs",
    fallback: 10_000,
    value: 5000,
  },
  {
    env: "SESSIONMUX_TOKENS_FILE",
    flag: "--tokens-file",
    key: "tokensFile",
    fallback: undefined,
    value: "/t",
  },
  { env: "SESSIONMUX_AGENT", flag: "--agent", key: "agent", fallback: "demo", value: "openai" },
  {
    env: "SESSIONMUX_IDLE_DETACH_MS",
    flag: "--idle-detach-ms",
    key: "idleDetachMs",
    fallback: 600_000,
    value: 1234,
  },
  {
    env: "SESSIONMUX_PING_INTERVAL_MS",
    flag: "--ping-interval-ms",
    key: "pingIntervalMs",
    fallback: 15_000,
    value: 2500,
  },
  { env: "SESSIONMUX_LOG_LEVEL", flag: "--log-level", key: "logLevel", fallback: "info", value: "warn" },
] as const;

const PINO_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

const refusal = (argv: string[], env: Record<string, string> = {}) =>
  commanderRefusal(() => parseServe(argv, env), [argv, env]);

interface Served {
  url: string;
  /** The banner's lines, written to stdout in one piece. */
  banner: string[];
  /** Calls `serve`'s handler of the signal, as its delivery would. */
  signal(name: "SIGTERM" | "SIGINT"): void;
}

let stdout: string[];
let stderr: string[];
let exits: (number | undefined)[];
const { cleanups, folder } = commandCleanups();

/** `serve` run from `dir`: the default `./data` resolves there (the test runner's threads cannot chdir). */
function workIn(dir: string): void {
  vi.spyOn(process, "cwd").mockReturnValue(dir);
}

/** The JSON lines the host logged to stderr (pino writes fd 2 itself). */
function logs(): Record<string, unknown>[] {
  return stderr
    .join("")
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

beforeEach(() => {
  stdout = [];
  stderr = [];
  exits = [];
  for (const name of Object.keys(process.env))
    if (name.startsWith("SESSIONMUX_")) vi.stubEnv(name, undefined);
  vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
    stdout.push(String(chunk));
    return true;
  });
  vi.spyOn(process, "exit").mockImplementation(((code?: number) => {
    exits.push(code);
  }) as never);
  const write = fs.write;
  vi.spyOn(fs, "write").mockImplementation(((fd: number, data: string | Uint8Array, ...rest: unknown[]) => {
    if (fd !== 2) return (write as (...args: unknown[]) => void)(fd, data, ...rest);
    stderr.push(Buffer.from(data).toString());
    const done = rest.at(-1) as (err: null, n: number) => void;
    process.nextTick(done, null, Buffer.byteLength(data));
  }) as never);
  const writeSync = fs.writeSync;
  vi.spyOn(fs, "writeSync").mockImplementation(((
    fd: number,
    data: string | Uint8Array,
    ...rest: unknown[]
  ) => {
    if (fd !== 2) return (writeSync as (...args: unknown[]) => number)(fd, data, ...rest);
    stderr.push(Buffer.from(data).toString());
    return Buffer.byteLength(data);
  }) as never);
});

/** Runs `sessionmux serve <argv>` here; resolves once the host listens (the action has returned). */
async function serve(argv: string[], env: Record<string, string> = {}): Promise<Served> {
  for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
  const before = { SIGTERM: process.listeners("SIGTERM"), SIGINT: process.listeners("SIGINT") };
  const program = quietProgram();
  registerServeCommand(program);
  const written = stdout.length;
  await program.parseAsync(["serve", ...argv], { from: "user" });
  const handlers = {
    SIGTERM: process.listeners("SIGTERM").filter((l) => !before.SIGTERM.includes(l)),
    SIGINT: process.listeners("SIGINT").filter((l) => !before.SIGINT.includes(l)),
  };
  expect([handlers.SIGTERM.length, handlers.SIGINT.length]).toEqual([1, 1]);
  let signalled = false;
  const signal = (name: "SIGTERM" | "SIGINT") => {
    signalled = true;
    for (const handler of handlers[name]) (handler as (s: string) => void)(name);
  };
  // a test that signals its host waits for the exit itself
  cleanups.push(async () => {
    if (!signalled) {
      const exited = exits.length;
      signal("SIGTERM");
      await vi.waitFor(() => expect(exits.length).toBeGreaterThan(exited), { timeout: 5000 });
    }
    for (const name of ["SIGTERM", "SIGINT"] as const) {
      for (const handler of handlers[name]) process.off(name, handler);
    }
  });
  const banner = stdout.slice(written).join("").split("\n");
  expect(banner.at(-1)).toBe("");
  banner.pop();
  const url = /^listening on (\S+)$/.exec(banner[0] ?? "")?.[1];
  if (!url) throw new Error(`no URL in ${banner.join("\n")}`);
  return { url, banner, signal };
}

/** `serve` refusing to start, with the error it throws (main prints `error: <code>: <message>`). */
async function serveRefusal(argv: string[], env: Record<string, string> = {}): Promise<StartupError> {
  for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
  const program = quietProgram();
  registerServeCommand(program);
  const written = stdout.length;
  const err = await program.parseAsync(["serve", ...argv], { from: "user" }).then(
    () => new Error(`serve ${argv.join(" ")} started`),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(StartupError);
  expect(stdout.slice(written).join("")).not.toContain("listening on");
  return err as StartupError;
}

/** A port nobody listens on at `host` just now. */
async function freePort(host: string): Promise<number> {
  const server = createServer().listen(0, host);
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const get = (url: string, token: string, headers: Record<string, string> = {}) =>
  fetch(url, { headers: { authorization: `Bearer ${token}`, ...headers } });

const sessionsStatus = async (url: string, token: string) =>
  (await get(`${url}/api/chat/sessions`, token)).status;

describe("sessionmux serve flags", () => {
  it("--help describes the command and every flag", () => {
    const program = new Command();
    registerServeCommand(program);
    const serve = program.commands.find((c) => c.name() === "serve");
    expect(serve?.description()).toBe(
      "run the host: durable log, WebSocket mux, HTTP routes and the console",
    );
    for (const option of serve?.options ?? []) expect(option.description, option.long).not.toBe("");
    // a LISTEN connection gone silent just after an answer is asked again only this long later,
    // and dropped once that question went unanswered as long: twice this in all
    const listenCheck = serve?.options.find((o) => o.long === "--db-listen-check-ms");
    expect(listenCheck?.description).toBe(
      "PostgreSQL: how often each LISTEN connection is asked SELECT 1 (counted from its last answer), " +
        "and how long the answer may take before the connection is dropped and reconnected: " +
        "one gone silent is dropped within twice this",
    );
  });

  it("default as the README says with neither flag nor variable", () => {
    const options = parseServe([]);
    for (const { key, fallback } of SERVE_FLAGS) expect([key, options[key]]).toEqual([key, fallback]);
    expect(options.token).toEqual([]);
    expect(options.allowedOrigin).toEqual([]);
    expect(options.createDbFolder).toBeUndefined();
  });

  it("each take their flag and their variable, the flag winning", () => {
    for (const { env, flag, key, value } of SERVE_FLAGS) {
      expect([flag, parseServe([flag, String(value)])[key]]).toEqual([flag, value]);
      expect([env, parseServe([], { [env]: String(value) })[key]]).toEqual([env, value]);
      const other =
        typeof value === "number"
          ? value + 1
          : flag === "--agent"
            ? "demo"
            : flag === "--log-level"
              ? "error"
              : `${value}x`;
      expect([flag, parseServe([flag, String(other)], { [env]: String(value) })[key]]).toEqual([flag, other]);
      vi.unstubAllEnvs();
    }
    expect(parseServe(["--create-db-folder"]).createDbFolder).toBe(true);
    expect(parseServe([], { SESSIONMUX_CREATE_DB_FOLDER: "1" }).createDbFolder).toBe(true);
    expect(parseServe(["--token", "a", "--token", "b=c,d"]).token).toEqual(["a", "b=c", "d"]);
    expect(parseServe([], { SESSIONMUX_TOKEN: "a, b=c" }).token).toEqual(["a", "b=c"]);
    expect(parseServe(["--allowed-origin", "https://a"]).allowedOrigin).toEqual(["https://a"]);
    expect(parseServe([], { SESSIONMUX_ALLOWED_ORIGINS: "https://a,https://b" }).allowedOrigin).toEqual([
      "https://a",
      "https://b",
    ]);
  });

  it("refuse a port or a pool size out of range, naming the flag", () => {
    expect(refusal(["--port", "65536"]).message).toBe(
      `error: option '--port <port>' argument '65536' is invalid. ` +
        `--port must be an integer from 0 to 65535 in decimal digits, got "65536"`,
    );
    expect(parseServe(["--port", "0"]).port).toBe(0);
    expect(refusal([], { SESSIONMUX_DB_POOL_SIZE: "1" }).message).toContain(
      `--db-pool-size must be an integer ≥ 2 in decimal digits, got "1"`,
    );
    expect(parseServe(["--db-pool-size", "2"]).dbPoolSize).toBe(2);
  });

  it("take every pino level and refuse another name, listing them", () => {
    for (const level of PINO_LEVELS) expect(parseServe(["--log-level", level]).logLevel).toBe(level);
    for (const argv of [["--log-level", "verbose"], []]) {
      const env: Record<string, string> = argv.length === 0 ? { SESSIONMUX_LOG_LEVEL: "verbose" } : {};
      expect(refusal(argv, env).message).toContain(
        `is invalid. Allowed choices are ${PINO_LEVELS.join(", ")}.`,
      );
      vi.unstubAllEnvs();
    }
    expect(refusal(["--agent", "claude"]).message).toContain("Allowed choices are demo, openai.");
  });
});

describe("sessionmux serve on SQLite, in this process", { timeout: 30_000 }, () => {
  it("with --token: listens where told, names its host, takes the token and keeps none of its own", async () => {
    const dir = folder();
    const served = await serve(["--db", dir.file("sessions.db"), "--host-id", "edge-7", "--port", "0"], {
      SESSIONMUX_TOKEN: "t1",
    });
    expect(served.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(served.banner).toEqual([
      `listening on ${served.url}`,
      "host id edge-7",
      `console: ${served.url}/ (append #token=<your token>)`,
    ]);
    expect(await sessionsStatus(served.url, "t1")).toBe(200);
    expect(await sessionsStatus(served.url, "t2")).toBe(401);
    expect(existsSync(dir.file("sessions.db"))).toBe(true);
    expect(existsSync(dir.file("sessionmux.token"))).toBe(false);
    const metrics = await (await get(`${served.url}/metrics`, "t1")).text();
    expect(metrics).toContain('sessionmux_host_info{host_id="edge-7"} 1');
    // the CLI's host reports the process too (CPU, memory, event loop)
    expect(metrics).toContain("process_cpu_user_seconds_total");
  });

  it("takes its address and port from the variables", async () => {
    const dir = folder();
    const port = await freePort("127.0.0.2");
    const served = await serve(["--db", dir.file("sessions.db"), "--token", "t"], {
      SESSIONMUX_HOST: "127.0.0.2",
      SESSIONMUX_PORT: String(port),
    });
    expect(served.url).toBe(`http://127.0.0.2:${port}`);
    expect(await sessionsStatus(served.url, "t")).toBe(200);
  });

  it("without a token keeps an admin token beside the database, prints it in the console URL and takes it", async () => {
    const dir = folder();
    const db = dir.file("sessions.db");
    const first = await serve(["--db", db, "--port", "0"]);
    const file = dir.file("sessionmux.token");
    const token = readFileSync(file, "utf8").trim();
    expect(token.length).toBeGreaterThan(20);
    expect(first.banner).toEqual([
      `listening on ${first.url}`,
      expect.stringMatching(/^host id \S+-[0-9a-f]{8}$/),
      `token kept in ${file} (sessionmux token rotate replaces it)`,
      `console: ${first.url}/#token=${token}`,
    ]);
    expect(await sessionsStatus(first.url, token)).toBe(200);
    expect(await sessionsStatus(first.url, "wrong")).toBe(401);
    first.signal("SIGTERM");
    await vi.waitFor(() => expect(exits).toEqual([0]), { timeout: 5000 });

    const second = await serve(["--db", db, "--port", "0"]);
    expect(second.banner[3]).toBe(`console: ${second.url}/#token=${token}`);
    expect(await sessionsStatus(second.url, token)).toBe(200);
  });

  it("creates the default database folder, and a given one only when asked", async () => {
    const dir = folder();
    workIn(dir.path);
    const served = await serve(["--port", "0", "--token", "t"]);
    expect(existsSync(dir.file("data/sessions.db"))).toBe(true);
    served.signal("SIGINT");
    await vi.waitFor(() => expect(exits).toEqual([0]), { timeout: 5000 });

    const missing = dir.file("missing/sessions.db");
    const variables: Record<string, string>[] = [{}, { SESSIONMUX_DB: missing }];
    // the variable is a switch: 0, false or empty (a compose file's unset variable) leave it off
    for (const off of ["0", "false", "", " FALSE "]) variables.push({ SESSIONMUX_CREATE_DB_FOLDER: off });
    for (const env of variables) {
      const argv = "SESSIONMUX_DB" in env ? ["--port", "0"] : ["--db", missing, "--port", "0"];
      const refused = await serveRefusal(argv, env);
      expect(refused.code).toBe("db_folder_missing");
      expect(refused.message).toContain(`database folder ${dir.file("missing")} does not exist`);
      vi.unstubAllEnvs();
    }
    expect(existsSync(dir.file("missing"))).toBe(false);
    await serve(["--db", missing, "--port", "0", "--create-db-folder"]);
    expect(existsSync(missing)).toBe(true);
    for (const on of ["1", "true"]) {
      const other = dir.file(`other-${on}/sessions.db`);
      await serve(["--db", other, "--port", "0"], { SESSIONMUX_CREATE_DB_FOLDER: on });
      expect(existsSync(other)).toBe(true);
    }
    // the flag wins over the variable
    const flagged = dir.file("flagged/sessions.db");
    await serve(["--db", flagged, "--port", "0", "--create-db-folder"], { SESSIONMUX_CREATE_DB_FOLDER: "0" });
    expect(existsSync(flagged)).toBe(true);
    const program = quietProgram();
    registerServeCommand(program);
    vi.stubEnv("SESSIONMUX_CREATE_DB_FOLDER", "yes");
    const refused = await program
      .parseAsync(["serve", "--db", dir.file("yes/sessions.db"), "--port", "0"], { from: "user" })
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(refused).toBeInstanceOf(CommanderError);
    expect((refused as CommanderError).exitCode).toBe(1);
    expect((refused as CommanderError).message).toBe(
      `error: SESSIONMUX_CREATE_DB_FOLDER must be 1 or true (on), 0, false or empty (off), got "yes"`,
    );
    expect(existsSync(dir.file("yes"))).toBe(false);
  });

  it("takes the tokens of a tokens file: comments, blank lines, CRLF and spaces around an entry", async () => {
    const dir = folder();
    const file = dir.file("tokens");
    writeFileSync(file, "# ops=commented\nalice=s3cret\r\n\n   bob=pass#  \nADMIN\n");
    const served = await serve(["--db", dir.file("sessions.db"), "--port", "0", "--tokens-file", file], {
      SESSIONMUX_TOKEN: "carol=c4rol",
    });
    expect(served.banner[2]).toBe(`console: ${served.url}/ (append #token=<your token>)`);
    for (const token of ["s3cret", "pass#", "ADMIN", "c4rol"]) {
      expect([token, await sessionsStatus(served.url, token)]).toEqual([token, 200]);
    }
    expect(await sessionsStatus(served.url, "commented")).toBe(401);
    // ADMIN is the admin token: it reads /metrics; alice is an ordinary principal
    expect((await get(`${served.url}/metrics`, "ADMIN")).status).toBe(200);
    expect((await get(`${served.url}/metrics`, "s3cret")).status).toBe(403);
    expect(existsSync(dir.file("sessionmux.token"))).toBe(false);
  });

  it("refuses a tokens file it cannot read, one that lists no token, and a bad entry, naming file and line", async () => {
    const dir = folder();
    const db = dir.file("sessions.db");
    const file = dir.file("tokens");
    const unreadable = await serveRefusal(["--db", db, "--port", "0"], { SESSIONMUX_TOKENS_FILE: file });
    expect(unreadable.code).toBe("token_file_unreadable");
    expect(unreadable.message).toMatch(
      new RegExp(`^cannot read --tokens-file ${file}: ENOENT: no such file or directory`),
    );
    expect(unreadable.cause).toMatchObject({ code: "ENOENT" });

    writeFileSync(file, "# alice=s3cret\n\n  \n");
    const empty = await serveRefusal(["--db", db, "--port", "0", "--tokens-file", file]);
    expect([empty.code, empty.message]).toEqual([
      "tokens_file_invalid",
      `--tokens-file ${file} lists no token (one name=secret or bare admin token per line)`,
    ]);
    writeFileSync(file, "bob=fine\n\nalice=\n");
    const bad = await serveRefusal(["--db", db, "--port", "0", "--tokens-file", file]);
    expect([bad.code, bad.message]).toEqual([
      "tokens_file_invalid",
      `--tokens-file ${file} line 3: alice=…: a secret is 1-4096 characters`,
    ]);
    // a mistyped entry is read as a bare admin token: one a Bearer header could never carry
    writeFileSync(file, "bob=fine\nalice: s3cret\n");
    const spaced = await serveRefusal(["--db", db, "--port", "0", "--tokens-file", file]);
    expect([spaced.code, spaced.message]).toEqual([
      "tokens_file_invalid",
      `--tokens-file ${file} line 2: the bare (admin) token: a secret holds no whitespace, which no Authorization: Bearer header carries`,
    ]);
    // no admin token of its own was minted in place of the file's
    expect(existsSync(dir.file("sessionmux.token"))).toBe(false);
    expect(existsSync(db)).toBe(false);
  });

  it("hands the host its metrics token, allowed origins and ping interval", async () => {
    const dir = folder();
    const served = await serve(
      ["--db", dir.file("sessions.db"), "--port", "0", "--token", "admin-t", "--ping-interval-ms", "20"],
      { SESSIONMUX_METRICS_TOKEN: "scrape", SESSIONMUX_ALLOWED_ORIGINS: "https://app.example" },
    );
    expect((await get(`${served.url}/metrics`, "scrape")).status).toBe(200);
    expect(await sessionsStatus(served.url, "scrape")).toBe(401);
    const cors = await get(`${served.url}/api/chat/sessions`, "admin-t", { origin: "https://app.example" });
    expect(cors.headers.get("access-control-allow-origin")).toBe("https://app.example");
    const ws = MuxPeer.socket(`${served.url.replace("http", "ws")}/api/remote.mux`, { token: "admin-t" });
    cleanups.push(() => ws.terminate());
    let pings = 0;
    ws.on("ping", () => pings++);
    // a loaded machine may take seconds to open the socket; the pings are what is checked
    await vi.waitFor(() => expect(pings).toBeGreaterThanOrEqual(3), { timeout: 30_000 });
  });

  it("refuses a token, a metrics token or an allowed origin no request could match, coded, before making anything", async () => {
    const dir = folder();
    const db = dir.file("sessions.db");
    const cases: [string[], Record<string, string>, string][] = [
      [
        ["--token", "alice=s3 cret"],
        {},
        "--token alice=…: a secret holds no whitespace, which no Authorization: Bearer header carries",
      ],
      [
        ["--token", "alice=same", "--token", "bob=same"],
        {},
        "--token bob=…: the same secret is configured twice",
      ],
      [
        ["--metrics-token", "scrape me"],
        {},
        "--metrics-token: a secret holds no whitespace, which no Authorization: Bearer header carries",
      ],
      [
        ["--token", "alice=scrape", "--metrics-token", "scrape"],
        {},
        "--metrics-token: it must differ from every principal's token",
      ],
      [
        ["--allowed-origin", "app.example.com"],
        {},
        '--allowed-origin: "app.example.com" is no origin: a browser sends scheme://host[:port] without a path, such as "https://app.example.com"',
      ],
      [
        [],
        { SESSIONMUX_ALLOWED_ORIGINS: "https://ok.example,https://app.example.com/" },
        '--allowed-origin: "https://app.example.com/" is no origin: a browser sends scheme://host[:port] without a path, such as "https://app.example.com"',
      ],
    ];
    for (const [argv, env, message] of cases) {
      const refused = await serveRefusal(["--db", db, "--port", "0", "--token", "admin-t", ...argv], env);
      expect([refused.code, refused.message]).toEqual(["option_invalid", message]);
      vi.unstubAllEnvs();
    }
    expect(existsSync(db)).toBe(false);
  });

  it("takes an empty SESSIONMUX_METRICS_TOKEN for none", async () => {
    const dir = folder();
    const served = await serve(["--db", dir.file("sessions.db"), "--port", "0", "--token", "admin-t"], {
      SESSIONMUX_METRICS_TOKEN: "",
    });
    expect((await get(`${served.url}/metrics`, "admin-t")).status).toBe(200);
  });

  it("without a metrics token, only an admin token reads /metrics", async () => {
    const dir = folder();
    const served = await serve(["--db", dir.file("sessions.db"), "--port", "0", "--token", "admin-t"]);
    expect((await get(`${served.url}/metrics`, "scrape")).status).toBe(401);
  });

  it("logs that it is ready, naming its address, database, host and agent, at the level asked", async () => {
    const dir = folder();
    workIn(dir.path);
    // a path given relative to the working directory is logged resolved
    const served = await serve(["--db", "sessions.db", "--port", "0", "--token", "t", "--host-id", "h-1"]);
    await vi.waitFor(() => expect(logs().map((l) => l.msg)).toContain("host ready"));
    const db = dir.file("sessions.db");
    expect(existsSync(db)).toBe(true);
    expect(logs().find((l) => l.msg === "host ready")).toMatchObject({
      level: 30,
      app: "sessionmux",
      url: served.url,
      db,
      hostId: "h-1",
      agent: "demo",
      generation: expect.any(String),
    });
    served.signal("SIGTERM");
    await vi.waitFor(() => expect(exits).toEqual([0]), { timeout: 5000 });
    stderr.length = 0;
    await serve(["--db", db, "--port", "0", "--token", "t"], { SESSIONMUX_LOG_LEVEL: "warn" });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(logs()).toEqual([]);
  });
});

describe("sessionmux serve shutdown, in this process", { timeout: 30_000 }, () => {
  it("on SIGTERM closes the host, releases port and database, and exits 0 once, a second signal notwithstanding", async () => {
    const dir = folder();
    const db = dir.file("sessions.db");
    const served = await serve(["--db", db, "--port", "0", "--token", "t"]);
    served.signal("SIGTERM");
    served.signal("SIGINT");
    await vi.waitFor(() => expect(logs().map((l) => l.msg)).toContain("shutdown complete"), {
      timeout: 5000,
    });
    await vi.waitFor(() => expect(exits).toEqual([0]), { timeout: 5000 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(exits).toEqual([0]);
    expect(logs().filter((l) => l.msg === "shutting down")).toEqual([
      expect.objectContaining({ signal: "SIGTERM", level: 30 }),
    ]);
    // every line names its host once, the process's own (ready, shutting down) too
    const hostId = logs().find((l) => l.msg === "host ready")?.hostId;
    expect(hostId).toEqual(expect.any(String));
    expect(logs().filter((l) => l.hostId !== hostId)).toEqual([]);
    expect(
      stderr
        .join("")
        .split("\n")
        .filter((line) => line.startsWith("{") && line.split('"hostId"').length !== 2),
    ).toEqual([]);
    await expect(fetch(`${served.url}/healthz`)).rejects.toThrow();
    // the file is free: another host opens it
    const again = await serve(["--db", db, "--port", "0", "--token", "t"]);
    expect(await sessionsStatus(again.url, "t")).toBe(200);
  });

  it("on SIGINT does the same, naming the signal", async () => {
    const dir = folder();
    const served = await serve(["--db", dir.file("sessions.db"), "--port", "0", "--token", "t"]);
    served.signal("SIGINT");
    await vi.waitFor(() => expect(exits).toEqual([0]), { timeout: 5000 });
    expect(logs().filter((l) => l.msg === "shutting down")).toEqual([
      expect.objectContaining({ signal: "SIGINT" }),
    ]);
  });

  it("exits 1 and logs the failure when a part of the host fails to close", async () => {
    const dir = folder();
    const served = await serve(["--db", dir.file("sessions.db"), "--port", "0", "--token", "t"]);
    vi.spyOn(SessionHost.prototype, "shutdown").mockRejectedValueOnce(new Error("agent would not stop"));
    served.signal("SIGTERM");
    await vi.waitFor(() => expect(exits).toEqual([1]), { timeout: 5000 });
    await vi.waitFor(() => expect(logs().map((l) => l.msg)).toContain("shutdown failed"));
    expect(logs().find((l) => l.msg === "shutdown failed")).toMatchObject({
      level: 50,
      err: { message: "agent would not stop" },
    });
  });
});

describe.skipIf(!pgUrl)("sessionmux serve on PostgreSQL, in this process", { timeout: 60_000 }, () => {
  /**
   * Drops `schema` after the test; and what a host put in `public` when it should not have (a
   * `--db-schema` lost on the way), so the shared test database stays as it was.
   */
  async function dropAfter(schema: string) {
    const publicWasEmpty = (await tablesIn("public")) === 0;
    cleanups.unshift(async () => {
      const client = new pg.Client({ connectionString: pgUrl! });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      if (publicWasEmpty) {
        const tables = await client.query<{ name: string }>(
          "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public'",
        );
        for (const { name } of tables.rows)
          await client.query(`DROP TABLE IF EXISTS public."${name}" CASCADE`);
        const functions = await client.query<{ name: string }>(
          "SELECT p.oid::regprocedure::text AS name FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace " +
            "WHERE n.nspname = 'public' AND p.proname LIKE 'sessionmux\\_%'",
        );
        for (const { name } of functions.rows) await client.query(`DROP FUNCTION IF EXISTS ${name} CASCADE`);
      }
      await client.end();
    });
  }

  async function tablesIn(schema: string): Promise<number> {
    const client = new pg.Client({ connectionString: pgUrl! });
    await client.connect();
    const { rows } = await client.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = $1",
      [schema],
    );
    await client.end();
    return rows[0]?.n ?? 0;
  }

  it("opens the schema asked, keeps its token in the default data folder, names both in its log", async () => {
    const schema = `serve_${randomBytes(5).toString("hex")}`;
    await dropAfter(schema);
    const dir = folder();
    workIn(dir.path);
    const served = await serve(["--port", "0", "--db-schema", schema, "--db-pool-size", "2"], {
      SESSIONMUX_DB: pgUrl!,
    });
    expect(await tablesIn(schema)).toBeGreaterThan(0);
    const file = dir.file("data/sessionmux.token");
    const token = readFileSync(file, "utf8").trim();
    expect(served.banner.slice(2)).toEqual([
      `token kept in ${file} (sessionmux token rotate replaces it)`,
      `console: ${served.url}/#token=${token}`,
    ]);
    expect(await sessionsStatus(served.url, token)).toBe(200);
    await vi.waitFor(() => expect(logs().map((l) => l.msg)).toContain("host ready"));
    expect(logs().find((l) => l.msg === "host ready")?.db).toBe(
      `${pgUrl!.replace(/^(postgres(?:ql)?:\/\/[^:/@]*:)[^@]*@/i, "$1***@")} (schema ${schema})`,
    );
  });

  it("refuses a --data-dir given by hand that does not exist, unless asked to create it", async () => {
    const schema = `serve_${randomBytes(5).toString("hex")}`;
    await dropAfter(schema);
    const dir = folder();
    const data = dir.file("kept");
    const argv = ["--port", "0", "--db", pgUrl!, "--db-schema", schema, "--data-dir", data];
    const refused = await serveRefusal(argv);
    expect(refused.code).toBe("db_folder_missing");
    expect(refused.message).toContain(`data folder ${data} does not exist`);
    await serve([...argv, "--create-db-folder"]);
    expect(existsSync(`${data}/sessionmux.token`)).toBe(true);
  });
});
