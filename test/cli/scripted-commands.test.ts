import { once } from "node:events";
import { createServer as createHttpServer } from "node:http";
import { type AddressInfo, createServer, type Server, type Socket } from "node:net";
import { CommanderError } from "commander";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { registerClientCommands } from "../../src/cli/client-commands.js";
import { startFakePeer } from "../client/fake-peer.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { startTcpProxy } from "../support/tcp-proxy.js";
import { tempDir } from "../support/temp-dir.js";
import { commanderRefusal } from "./commander-refusal.js";
import { capturedOutput, commandCleanups, quietProgram } from "./in-process-command.js";

/**
 * The scripted client commands (`follow`, `prompt`, `list`, `page`, `create`, `control`) run in
 * this process against a real host on 127.0.0.1: their flags parsed by commander, their stdout and
 * stderr captured, their exit code read from `process.exitCode`, their SIGINT/SIGTERM handlers
 * called as the signals would.
 */

const ADMIN = { name: "admin", admin: true };

let host: TestHost;
beforeAll(async () => {
  host = await startTestHost();
});
afterAll(async () => {
  await host?.dispose();
});

const { stdout, stderr } = capturedOutput();
let exitCodeBefore: typeof process.exitCode;
const { cleanups, folder } = commandCleanups();

beforeEach(() => {
  exitCodeBefore = process.exitCode;
});

afterEach(() => {
  process.exitCode = exitCodeBefore;
});

const program = () => {
  const p = quietProgram();
  registerClientCommands(p);
  return p;
};

/** Runs `sessionmux <argv>` here; `--url` and `--token` are the test host's unless given. */
function run(argv: string[], connection: string[] = ["--url", host.wsUrl, "--token", ADMIN_TOKEN]) {
  return program().parseAsync([...argv, ...connection], { from: "user" });
}

/** The one JSON line a one-shot command prints. */
async function oneShot(argv: string[]): Promise<Record<string, unknown>> {
  const written = stdout.length;
  await run(argv);
  const out = stdout.slice(written).join("");
  expect(out.endsWith("\n")).toBe(true);
  expect(out.split("\n")).toHaveLength(2);
  return JSON.parse(out) as Record<string, unknown>;
}

/** The options `command` parses `argv` to, its action not run. */
function parsed(command: string, argv: string[]): Record<string, unknown> {
  const p = program();
  const sub = p.commands.find((c) => c.name() === command);
  if (!sub) throw new Error(`no ${command} command`);
  sub.action(() => {});
  p.parse([command, ...argv], { from: "user" });
  return sub.opts();
}

/** What the command throws (main prints `error: <code>: <message>` and exits 2 or 1). */
async function failure(argv: string[], connection?: string[]): Promise<Error> {
  const err = await run(argv, connection).then(
    () => new Error(`${argv.join(" ")} succeeded`),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(Error);
  return err as Error;
}

const lines = () =>
  stdout
    .join("")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as Record<string, unknown>);

async function listen(server: Server | ReturnType<typeof createHttpServer>): Promise<string> {
  const sockets = new Set<Socket>();
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  cleanups.push(() => {
    for (const socket of sockets) socket.destroy();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `ws://127.0.0.1:${(server.address() as AddressInfo).port}/api/remote.mux`;
}

/** A server that answers every WebSocket upgrade with `status`. */
function refusing(status: number): Promise<string> {
  const server = createHttpServer();
  server.on("upgrade", (_req, socket) => {
    socket.end(`HTTP/1.1 ${status} No\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
  });
  return listen(server);
}

/** The SIGINT/SIGTERM listeners added while `body` runs. */
function signalListeners() {
  return { SIGINT: process.listeners("SIGINT"), SIGTERM: process.listeners("SIGTERM") };
}

describe("connection flags", () => {
  const COMMANDS = [
    "follow",
    "prompt",
    "list",
    "page",
    "create",
    "control",
    "answer",
    "cancel",
    "rename",
    "fork",
    "search",
    "clear",
    "delete",
  ];
  const ARGS: Record<string, string[]> = {
    follow: ["s"],
    prompt: ["s", "t"],
    page: ["s"],
    answer: ["i", "approve"],
    cancel: ["s"],
    rename: ["s", "t"],
    fork: ["s"],
    search: ["q"],
    clear: ["s"],
    delete: ["s"],
  };

  it("every command takes --url, --token and --timeout, defaulting to the local host and 30 s", () => {
    expect(
      program()
        .commands.map((c) => c.name())
        .sort(),
    ).toEqual([...COMMANDS].sort());
    for (const command of COMMANDS) {
      const options = parsed(command, ARGS[command] ?? []);
      expect([command, options.url, options.token, options.timeout]).toEqual([
        command,
        "ws://127.0.0.1:8787/api/remote.mux",
        undefined,
        30_000,
      ]);
      const given = parsed(command, [
        ...(ARGS[command] ?? []),
        "--url",
        "wss://example.com/api/remote.mux",
        "--token",
        "t0k",
        "--timeout",
        "250",
      ]);
      expect([command, given.url, given.token, given.timeout]).toEqual([
        command,
        "wss://example.com/api/remote.mux",
        "t0k",
        250,
      ]);
    }
  });

  it("--url takes a mux URL as given or a host's address as the mux below it, and refuses anything else naming the form", () => {
    for (const url of [
      "ws://h:1/api/remote.mux",
      "wss://h/x",
      "http://h:2/api/remote.mux",
      "https://h/y/api/remote.mux",
    ]) {
      expect(parsed("list", ["--url", url]).url).toBe(url);
    }
    const addresses = [
      ["http://127.0.0.1:8787", "ws://127.0.0.1:8787/api/remote.mux"],
      ["http://127.0.0.1:8787/#token=abc", "ws://127.0.0.1:8787/api/remote.mux"],
      ["https://example.com/chat", "wss://example.com/chat/api/remote.mux"],
      ["https://example.com/chat/?x=1", "wss://example.com/chat/api/remote.mux"],
      ["http://u:p@h:2/a/b", "ws://u:p@h:2/a/b/api/remote.mux"],
    ];
    for (const [address, mux] of addresses)
      expect(parsed("list", ["--url", address!]).url, address).toBe(mux);
    for (const url of ["localhost:8787", "127.0.0.1:8787", "ftp://h/x", "file:///tmp/x", "not a url"]) {
      const err = commanderRefusal(() => parsed("list", ["--url", url]), url);
      expect(err.code, url).toBe("commander.invalidArgument");
      expect(err.message).toContain(
        "It must be a ws:// or wss:// URL, e.g. ws://127.0.0.1:8787/api/remote.mux, or the host's http:// or https:// address",
      );
    }
  });

  it("--timeout is a whole number of ms from 1, refused naming the flag", () => {
    for (const bad of ["0", "-5", "1.5", "soon"]) {
      const err = commanderRefusal(() => parsed("list", ["--timeout", bad]), bad);
      expect(err.message, bad).toContain(`--timeout must be an integer ≥ 1 in decimal digits, got "${bad}"`);
    }
    expect(parsed("list", ["--timeout", "1"]).timeout).toBe(1);
  });

  it("the command flags parse to numbers and their defaults", () => {
    expect(parsed("follow", ["s"])).toMatchObject({ after: 0, onReset: "continue" });
    expect(parsed("follow", ["s"]).until).toBeUndefined();
    expect(parsed("follow", ["s"]).epoch).toBeUndefined();
    expect(parsed("follow", ["s", "--after", "7", "--until", "9", "--on-reset", "exit"])).toMatchObject({
      after: 7,
      until: 9,
      onReset: "exit",
    });
    expect(parsed("follow", ["s", "--on-reset", "continue"]).onReset).toBe("continue");
    expect(commanderRefusal(() => parsed("follow", ["s", "--on-reset", "stop"]), "stop").code).toBe(
      "commander.invalidArgument",
    );
    // each number flag refused naming itself and its bound
    const refusals: [string, string[], string][] = [
      ["follow", ["s", "--after", "-1"], '--after must be an integer ≥ 0 in decimal digits, got "-1"'],
      ["follow", ["s", "--until", "0"], '--until must be an integer ≥ 1 in decimal digits, got "0"'],
      ["list", ["--limit", "0"], '--limit must be an integer ≥ 1 in decimal digits, got "0"'],
      ["page", ["s", "--after", "x"], '--after must be an integer ≥ 0 in decimal digits, got "x"'],
      ["page", ["s", "--before", "0"], '--before must be an integer ≥ 1 in decimal digits, got "0"'],
      ["page", ["s", "--limit", "0"], '--limit must be an integer ≥ 1 in decimal digits, got "0"'],
    ];
    for (const [command, argv, message] of refusals) {
      expect(commanderRefusal(() => parsed(command, argv), argv).message).toContain(message);
    }
    expect(parsed("page", ["s", "--after", "0"]).after).toBe(0);
  });

  it("--help of follow and control says what they print and how they behave", () => {
    const described = (name: string) =>
      program()
        .commands.find((c) => c.name() === name)
        ?.description() ?? "";
    expect(described("follow")).toContain("{seq,type,at,data}, resuming silently across disconnects");
    expect(described("follow")).toContain(
      "the new epoch's events print from seq 1 and a note goes to stderr",
    );
    expect(described("control")).toContain("print every change of the live-state mirror as a JSON line");
    expect(described("control")).toContain(
      '{"kind":"stale"} while disconnected, {"kind":"generationChanged"}',
    );
    expect(described("control")).toContain('{"kind":"removed","sessionId"} for a session deleted');
  });

  it("every command and flag is described in --help", () => {
    for (const command of program().commands) {
      expect(command.description(), command.name()).not.toBe("");
      for (const option of command.options) expect(option.description, option.long).not.toBe("");
    }
  });
});

describe("reaching the host", () => {
  it("the token comes from --token, else SESSIONMUX_TOKEN; without either nothing connects", async () => {
    const url = ["--url", host.wsUrl];
    const missing = await failure(["list"], url);
    expect(missing.message).toBe("missing token: pass --token or set SESSIONMUX_TOKEN");
    expect(missing).not.toBeInstanceOf(CommanderError);

    vi.stubEnv("SESSIONMUX_TOKEN", ADMIN_TOKEN);
    await run(["list"], url);
    expect(lines().at(-1)).toHaveProperty("sessions");

    // the flag wins over the variable, both ways
    const refused = await failure(["list"], [...url, "--token", "wrong"]);
    expect((refused as SessionmuxError).code).toBe("unauthorized");
    vi.stubEnv("SESSIONMUX_TOKEN", "wrong");
    stdout.length = 0;
    await run(["list"], [...url, "--token", ADMIN_TOKEN]);
    expect(lines()[0]).toHaveProperty("sessions");
  });

  it("the URL comes from --url, else SESSIONMUX_URL, else the local host; a malformed variable is refused naming it", async () => {
    vi.stubEnv("SESSIONMUX_URL", host.wsUrl);
    await run(["list"], ["--token", ADMIN_TOKEN]);
    expect(lines().at(-1)).toHaveProperty("sessions");
    expect(parsed("list", []).url).toBe(host.wsUrl);

    // the address `serve` prints reaches the same mux
    vi.stubEnv("SESSIONMUX_URL", host.url);
    stdout.length = 0;
    await run(["list"], ["--token", ADMIN_TOKEN]);
    expect(lines().at(-1)).toHaveProperty("sessions");
    vi.stubEnv("SESSIONMUX_URL", host.wsUrl);

    // the flag wins over the variable
    const elsewhere = await refusing(404);
    const wrongPath = await failure(["list"], ["--url", elsewhere, "--token", ADMIN_TOKEN]);
    expect((wrongPath as SessionmuxError).code).toBe("not_found");
    expect(parsed("list", ["--url", elsewhere]).url).toBe(elsewhere);

    vi.stubEnv("SESSIONMUX_URL", "localhost:8787");
    const refusal = commanderRefusal(() => parsed("list", []), []);
    expect(refusal.message).toContain("from env 'SESSIONMUX_URL' is invalid");
    expect(refusal.message).toContain("It must be a ws:// or wss:// URL");
  });

  it("a refused token ends the command at once with unauthorized, naming the URL and what to check", async () => {
    const started = Date.now();
    const err = await failure(["list"], ["--url", host.wsUrl, "--token", "wrong", "--timeout", "20000"]);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(err).toBeInstanceOf(SessionmuxError);
    expect((err as SessionmuxError).code).toBe("unauthorized");
    expect(err.message).toBe(
      `the host at ${host.wsUrl} refused the token (HTTP 401); check --token or SESSIONMUX_TOKEN`,
    );
    expect(stdout).toEqual([]);
  });

  it("a 403 at the upgrade is forbidden_origin, with the same advice", async () => {
    const url = await refusing(403);
    const err = await failure(["list"], ["--url", url, "--token", "t", "--timeout", "20000"]);
    expect((err as SessionmuxError).code).toBe("forbidden_origin");
    expect(err.message).toBe(
      `the host at ${url} refused the token (HTTP 403); check --token or SESSIONMUX_TOKEN`,
    );
  });

  it("a wrong path (404) is not_found, saying where the mux is; for streaming commands too", async () => {
    const url = host.wsUrl.replace("/api/remote.mux", "/remote.mux");
    for (const argv of [["list"], ["follow", "any"], ["control"]]) {
      const err = await failure(argv, ["--url", url, "--token", ADMIN_TOKEN, "--timeout", "20000"]);
      expect((err as SessionmuxError).code, argv[0]).toBe("not_found");
      expect(err.message).toBe(`no sessionmux mux at ${url} (HTTP 404); the path is /api/remote.mux`);
    }
    expect(stdout).toEqual([]);
    expect(process.exitCode).toBe(exitCodeBefore);
  });

  it("another refusal (400) is bad_request with its status", async () => {
    const url = await refusing(400);
    const err = await failure(["list"], ["--url", url, "--token", "t", "--timeout", "20000"]);
    expect(err).toBeInstanceOf(SessionmuxError);
    expect((err as SessionmuxError).code).toBe("bad_request");
    expect(err.message).toBe(`the host at ${url} refused the connection (HTTP 400)`);
  });

  it("nothing listening ends the command at once, asking whether serve runs there", async () => {
    const server = createServer();
    const url = await listen(server);
    await new Promise((resolve) => server.close(resolve));
    const started = Date.now();
    const err = await failure(["list"], ["--url", url, "--token", "t", "--timeout", "20000"]);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(err).not.toBeInstanceOf(SessionmuxError);
    expect(err.message).toBe(
      `cannot reach a sessionmux host at ${url}; is \`sessionmux serve\` running there?`,
    );
  });

  it("an unknown host name ends the command at once too", async () => {
    const url = "ws://no-such-host.invalid:8787/api/remote.mux";
    const err = await failure(["list"], ["--url", url, "--token", "t", "--timeout", "20000"]);
    expect(err.message).toBe(
      `cannot reach a sessionmux host at ${url}; is \`sessionmux serve\` running there?`,
    );
  });

  it("a host that never answers is given up after --timeout, saying so", async () => {
    const url = await listen(createServer(() => {}));
    const started = Date.now();
    const err = await failure(["list"], ["--url", url, "--token", "t", "--timeout", "300"]);
    const took = Date.now() - started;
    expect(err.message).toBe(`no answer from ${url} within 300 ms; is the host healthy?`);
    expect(took).toBeGreaterThanOrEqual(250);
    expect(took).toBeLessThan(5000);
  });

  it("a host answering 503 is retried until --timeout, not refused at the first answer", async () => {
    const url = await refusing(503);
    const started = Date.now();
    const err = await failure(["list"], ["--url", url, "--token", "t", "--timeout", "600"]);
    expect(err.message).toBe(`no answer from ${url} within 600 ms; is the host healthy?`);
    expect(Date.now() - started).toBeGreaterThanOrEqual(550);
  });
});

describe("one-shot commands", () => {
  it("create prints the header with the --id, --title and --model given, or the host's choice", async () => {
    const created = await oneShot([
      "create",
      "--id",
      "os-a",
      "--title",
      "From the CLI",
      "--model",
      "demo-careful",
    ]);
    expect(created.header).toMatchObject({ sessionId: "os-a", title: "From the CLI", model: "demo-careful" });
    const chosen = (await oneShot(["create"])) as { header: { sessionId: string; title?: string } };
    expect(chosen.header.sessionId).not.toBe("");
    expect(chosen.header.sessionId).not.toBe("os-a");
  });

  it("prompt sends once per --client-message-id, and a fresh id for each run without one", async () => {
    await host.host.call(ADMIN, "session.create", { sessionId: "os-p" });
    const first = (await oneShot(["prompt", "os-p", "hello", "--client-message-id", "m-1"])) as {
      seq: number;
      queued: boolean;
    };
    expect(first.queued).toBe(false);
    const again = await oneShot(["prompt", "os-p", "hello", "--client-message-id", "m-1"]);
    expect(again.seq).toBe(first.seq);
    await vi.waitFor(async () => {
      const page = await host.store.page("os-p", { afterSeq: 0, limit: 100 });
      if (page.status !== "ok") throw new Error(page.status);
      expect(page.events.filter((e) => e.type === "user/message")).toHaveLength(1);
    });
    const other = (await oneShot(["prompt", "os-p", "hello"])) as { seq?: number };
    const third = (await oneShot(["prompt", "os-p", "hello"])) as { seq?: number };
    const page = await host.store.page("os-p", { afterSeq: 0, limit: 100 });
    if (page.status !== "ok") throw new Error(page.status);
    const messages = page.events.filter((e) => e.type === "user/message");
    expect(messages.map((e) => (e.data as { text: string }).text)).toEqual(["hello", "hello", "hello"]);
    expect(other).not.toEqual(third);
  });

  it("list honours --limit, --parked and --before", async () => {
    for (const id of ["os-l1", "os-l2", "os-l3"])
      await host.host.call(ADMIN, "session.create", { sessionId: id });
    const all = (await oneShot(["list"])) as { sessions: { sessionId: string }[] };
    expect(all.sessions.length).toBeGreaterThanOrEqual(3);
    const one = (await oneShot(["list", "--limit", "1"])) as {
      sessions: { sessionId: string }[];
      next?: string;
    };
    expect(one.sessions).toHaveLength(1);
    expect(one.sessions[0]?.sessionId).toBe(all.sessions[0]?.sessionId);
    expect(typeof one.next).toBe("string");
    const after = (await oneShot(["list", "--limit", "1", "--before", one.next as string])) as {
      sessions: { sessionId: string }[];
    };
    expect(after.sessions.map((s) => s.sessionId)).toEqual([all.sessions[1]?.sessionId]);
    const parked = (await oneShot(["list", "--parked"])) as { sessions: unknown[] };
    expect(parked.sessions).toEqual([]);
  });

  it("page honours --after, --before and --limit, and defaults to the tail", async () => {
    await host.host.call(ADMIN, "session.create", { sessionId: "os-pg" });
    await host.store.append(
      "os-pg",
      Array.from({ length: 9 }, (_, i) => ({ type: "session/renamed" as const, data: { title: `t${i}` } })),
    );
    const seqs = (page: Record<string, unknown>) => (page.events as { seq: number }[]).map((e) => e.seq);
    expect(seqs(await oneShot(["page", "os-pg", "--after", "3", "--limit", "2"]))).toEqual([4, 5]);
    expect(seqs(await oneShot(["page", "os-pg", "--before", "4"]))).toEqual([1, 2, 3]);
    expect(seqs(await oneShot(["page", "os-pg", "--limit", "2"]))).toEqual([9, 10]);
    expect(seqs(await oneShot(["page", "os-pg", "--after", "0", "--limit", "1"]))).toEqual([1]);
  });

  it("a call the host refuses is thrown with its code, nothing printed", async () => {
    const err = await failure(["page", "no-such-session"]);
    expect((err as SessionmuxError).code).toBe("session_not_found");
    expect(stdout).toEqual([]);
  });

  it("a call the host never answers is given up after --timeout with code timeout", async () => {
    const peer = await startFakePeer({ onCall: () => undefined });
    cleanups.push(() => peer.stop());
    const started = Date.now();
    const err = await failure(["list"], ["--url", peer.url, "--token", "t", "--timeout", "400"]);
    expect((err as SessionmuxError).code).toBe("timeout");
    expect(err.message).toContain("no answer within 400 ms");
    expect(Date.now() - started).toBeLessThan(5000);
    expect(stdout).toEqual([]);
  });

  it("closes its connection when done, answered or refused", async () => {
    const server = host.server;
    const count = () => new Promise<number>((resolve) => server.getConnections((_e, n) => resolve(n)));
    await oneShot(["list"]);
    await vi.waitFor(async () => expect(await count()).toBe(0));
    await failure(["page", "no-such-session"]);
    await vi.waitFor(async () => expect(await count()).toBe(0));
  });
});

describe("follow", () => {
  async function session(id: string, events: number) {
    await host.host.call(ADMIN, "session.create", { sessionId: id });
    if (events > 0)
      await host.store.append(
        id,
        Array.from({ length: events }, (_, i) => ({
          type: "session/renamed" as const,
          data: { title: `t${i}` },
        })),
      );
  }

  it("prints the events after --after as {seq,type,at,data} lines and exits 0 at --until", async () => {
    await session("f-a", 9);
    await run(["follow", "f-a", "--after", "4", "--until", "8"]);
    const printed = lines();
    expect(printed.map((e) => e.seq)).toEqual([5, 6, 7, 8]);
    expect(Object.keys(printed[0] ?? {})).toEqual(["seq", "type", "at", "data"]);
    expect(printed[0]).toMatchObject({ type: "session/renamed", data: { title: "t3" } });
    expect(process.exitCode).toBe(exitCodeBefore);
  });

  it("exits 0 at once, printing nothing, when --after is already at or past --until", async () => {
    await session("f-until-past", 9);
    await run(["follow", "f-until-past", "--after", "7", "--until", "7"]);
    await run(["follow", "f-until-past", "--after", "9", "--until", "3"]);
    expect(lines()).toEqual([]);
    expect(process.exitCode).toBe(exitCodeBefore);
  });

  it("with a stale --epoch past --until, replays the current epoch from seq 1 up to --until", async () => {
    await session("f-until-stale", 9);
    await run(["follow", "f-until-stale", "--after", "9", "--epoch", "stale-epoch", "--until", "2"]);
    expect(lines().map((e) => e.seq)).toEqual([1, 2]);
  });

  it("from the start by default, stopping at --until within one batch", async () => {
    await session("f-b", 9);
    await run(["follow", "f-b", "--until", "2"]);
    expect(lines().map((e) => e.seq)).toEqual([1, 2]);
  });

  it("waits for events committed later, and removes its signal handlers when done", async () => {
    await session("f-c", 0);
    const before = signalListeners();
    const done = run(["follow", "f-c", "--until", "3"]);
    await vi.waitFor(() => expect(lines().map((e) => e.seq)).toEqual([1]));
    expect(process.listeners("SIGINT").length).toBe(before.SIGINT.length + 1);
    expect(process.listeners("SIGTERM").length).toBe(before.SIGTERM.length + 1);
    await host.store.append("f-c", [
      { type: "session/renamed", data: { title: "a" } },
      { type: "session/renamed", data: { title: "b" } },
    ]);
    await done;
    expect(lines().map((e) => e.seq)).toEqual([1, 2, 3]);
    expect(signalListeners()).toEqual(before);
  });

  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    it(`${signal} ends it with exit 0`, async () => {
      await session(`f-${signal}`, 2);
      const before = signalListeners();
      const done = run(["follow", `f-${signal}`]);
      await vi.waitFor(() => expect(lines()).toHaveLength(3));
      const added = process.listeners(signal).filter((l) => !before[signal].includes(l));
      expect(added).toHaveLength(1);
      (added[0] as (s: string) => void)(signal);
      await done;
      expect(process.exitCode).toBe(exitCodeBefore);
      expect(signalListeners()).toEqual(before);
    });
  }

  it("an unknown session is thrown with its code", async () => {
    const before = signalListeners();
    const err = await failure(["follow", "no-such-session"]);
    expect((err as SessionmuxError).code).toBe("session_not_found");
    expect(stdout).toEqual([]);
    expect(signalListeners()).toEqual(before);
  });

  it("a session deleted while followed ends the command with session_retired", async () => {
    await session("f-d", 0);
    const before = signalListeners();
    const done = run(["follow", "f-d"]).then(
      () => new Error("follow ended quietly"),
      (e: unknown) => e,
    );
    await vi.waitFor(() => expect(lines()).toHaveLength(1));
    await host.host.call(ADMIN, "session.delete", { sessionId: "f-d" });
    const err = await done;
    expect((err as SessionmuxError).code).toBe("session_retired");
    expect(signalListeners()).toEqual(before);
  });

  it("after a history clear, notes the new epoch on stderr and goes on with the new epoch from seq 1", async () => {
    await session("f-r", 2);
    const before = signalListeners();
    const done = run(["follow", "f-r"]);
    await vi.waitFor(() => expect(lines().map((e) => e.seq)).toEqual([1, 2, 3]));
    stdout.length = 0;
    const { epoch } = (await host.host.call(ADMIN, "session.clear", { sessionId: "f-r" })) as {
      epoch: string;
    };
    await vi.waitFor(() => expect(stderr.join("")).toBe(`reset: history cleared, new epoch ${epoch}\n`));
    await host.store.append("f-r", [{ type: "session/renamed", data: { title: "after" } }]);
    await vi.waitFor(() => expect(lines().at(-1)).toMatchObject({ data: { title: "after" } }));
    expect(lines()[0]?.seq).toBe(1);
    const added = process.listeners("SIGINT").filter((l) => !before.SIGINT.includes(l));
    (added[0] as (s: string) => void)("SIGINT");
    await done;
    expect(process.exitCode).toBe(exitCodeBefore);
  });

  it("--on-reset exit ends with exit code 3 at the clear", async () => {
    await session("f-x", 2);
    const done = run(["follow", "f-x", "--on-reset", "exit"]);
    await vi.waitFor(() => expect(lines()).toHaveLength(3));
    stdout.length = 0;
    const { epoch } = (await host.host.call(ADMIN, "session.clear", { sessionId: "f-x" })) as {
      epoch: string;
    };
    await done;
    expect(process.exitCode).toBe(3);
    expect(stderr.join("")).toBe(`reset: history cleared, new epoch ${epoch}\n`);
    expect(stdout).toEqual([]);
  });

  it("--epoch with --after resumes within that epoch; a stale one replays from seq 1", async () => {
    await session("f-e", 4);
    const { epoch } = (await host.host.call(ADMIN, "session.clear", { sessionId: "f-e" })) as {
      epoch: string;
    };
    await host.store.append("f-e", [
      { type: "session/renamed", data: { title: "n1" } },
      { type: "session/renamed", data: { title: "n2" } },
    ]);
    const page = await host.store.page("f-e", { afterSeq: 0, limit: 100 });
    if (page.status !== "ok") throw new Error(page.status);
    const last = page.events.at(-1)?.seq as number;
    await run(["follow", "f-e", "--after", String(last - 1), "--epoch", epoch, "--until", String(last)]);
    expect(lines().map((e) => e.seq)).toEqual([last]);
    expect(stderr).toEqual([]);
    stdout.length = 0;
    await run(["follow", "f-e", "--after", String(last - 1), "--epoch", "stale-epoch", "--until", "1"]);
    expect(lines().map((e) => e.seq)).toEqual([1]);
    expect(stderr.join("")).toBe(`reset: history cleared, new epoch ${epoch}\n`);
  });
});

describe("control", () => {
  it("prints the baseline, then each live change, as JSON lines until a signal", async () => {
    const before = signalListeners();
    const done = run(["control"]);
    await vi.waitFor(() => expect(lines().length).toBeGreaterThanOrEqual(1));
    expect(lines()[0]).toMatchObject({ kind: "baseline", generation: host.host.generation });
    expect(lines().some((l) => l.kind === "generationChanged")).toBe(false);
    await host.host.call(ADMIN, "session.create", { sessionId: "c-a" });
    await host.host.call(ADMIN, "session.prompt", { sessionId: "c-a", text: "hi", clientMessageId: "c-a-1" });
    await vi.waitFor(() =>
      expect(
        lines()
          .slice(1)
          .map((l) => l.kind),
      ).toContain("agent"),
    );
    const added = process.listeners("SIGTERM").filter((l) => !before.SIGTERM.includes(l));
    (added[0] as (s: string) => void)("SIGTERM");
    await done;
    expect(signalListeners()).toEqual(before);
  });
});

describe("across a host restart", () => {
  it("follow resumes silently and prints each event once; control says the generation changed", async () => {
    const dbPath = folder().file("restart.db");
    let first: TestHost | undefined = await startTestHost({ dbPath });
    const port = first.port;
    cleanups.push(() => first?.close());
    const url = `ws://127.0.0.1:${port}/api/remote.mux`;
    const connection = ["--url", url, "--token", ADMIN_TOKEN];
    await first.host.call(ADMIN, "session.create", { sessionId: "r-a" });
    await first.store.append("r-a", [{ type: "session/renamed", data: { title: "a" } }]);
    const oldGeneration = first.host.generation;

    const followed = program().parseAsync(["follow", "r-a", "--until", "4", ...connection], { from: "user" });
    const controlled = program().parseAsync(["control", ...connection], { from: "user" });
    await vi.waitFor(() => {
      const printed = lines();
      expect(printed.filter((l) => "seq" in l).map((l) => l.seq)).toEqual([1, 2]);
      expect(printed.filter((l) => l.kind === "baseline")).toHaveLength(1);
    });
    await first.close();
    first = undefined;
    const second = await startTestHost({ dbPath, port });
    cleanups.push(() => second.close());
    await second.store.append("r-a", [
      { type: "session/renamed", data: { title: "b" } },
      { type: "session/renamed", data: { title: "c" } },
    ]);
    await followed;
    expect(
      lines()
        .filter((l) => "seq" in l)
        .map((l) => l.seq),
    ).toEqual([1, 2, 3, 4]);
    await vi.waitFor(() => expect(lines().filter((l) => l.kind === "baseline")).toHaveLength(2), {
      timeout: 7000,
    });
    const control = lines().filter((l) => "kind" in l);
    const changed = control.findIndex((l) => l.kind === "generationChanged");
    expect(control[changed]).toEqual({ kind: "generationChanged", generation: second.host.generation });
    expect(second.host.generation).not.toBe(oldGeneration);
    expect(control[changed + 1]).toMatchObject({ kind: "baseline", generation: second.host.generation });
    // a change after the restart's baseline is printed alone, not as another generation change
    await second.host.call(ADMIN, "session.create", { sessionId: "r-b" });
    await second.host.call(ADMIN, "session.prompt", {
      sessionId: "r-b",
      text: "hi",
      clientMessageId: "r-b-1",
    });
    await vi.waitFor(() => expect(lines().filter((l) => "kind" in l).length).toBeGreaterThan(control.length));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(lines().filter((l) => l.kind === "generationChanged")).toHaveLength(1);
    expect(control.some((l) => l.kind === "stale")).toBe(true);
    expect(stderr).toEqual([]);
    const listener = process.listeners("SIGINT").at(-1) as (s: string) => void;
    listener("SIGINT");
    await controlled;
  }, 20_000);
});

describe("reconnecting", () => {
  it("a reconnect the host does not answer is given up after --timeout and tried again; follow resumes", async () => {
    const silentSockets: Socket[] = [];
    const silent = createServer((socket) => silentSockets.push(socket));
    await listen(silent);
    cleanups.push(() => {
      for (const socket of silentSockets) socket.destroy();
    });
    let target = host.port;
    const proxy = await startTcpProxy(() => target);
    cleanups.push(() => proxy.stop());
    await host.host.call(ADMIN, "session.create", { sessionId: "rc-a" });
    const url = `ws://127.0.0.1:${proxy.port}/api/remote.mux`;
    const done = run(
      ["follow", "rc-a", "--until", "2"],
      ["--url", url, "--token", ADMIN_TOKEN, "--timeout", "500"],
    );
    await vi.waitFor(() => expect(lines().map((l) => l.seq)).toEqual([1]));
    target = (silent.address() as AddressInfo).port;
    proxy.cutAll();
    await vi.waitFor(() => expect(silentSockets.length).toBeGreaterThanOrEqual(1));
    // the upgrade nobody answers is given up after --timeout (500 ms), not the 10 s default, and tried again
    await vi.waitFor(() => expect(silentSockets.length).toBeGreaterThanOrEqual(2), { timeout: 4000 });
    target = host.port;
    await host.store.append("rc-a", [{ type: "session/renamed", data: { title: "back" } }]);
    await done;
    expect(lines().map((l) => l.seq)).toEqual([1, 2]);
    expect(stderr).toEqual([]);
  }, 15_000);
});

describe("a reconnect the host refuses", () => {
  /** A host on `dbPath` that `follow` and `control` reach, restarted on its port with `tokens`. */
  async function restartedWith(argv: string[], tokens: { name: string; secret: string; admin: boolean }[]) {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const dbPath = dir.file("refused.db");
    const first = await startTestHost({ dbPath });
    const port = first.port;
    await first.host.call(ADMIN, "session.create", { sessionId: "rf-a" });
    const before = signalListeners();
    const done = run(argv, ["--url", first.wsUrl, "--token", ADMIN_TOKEN]).then(
      () => new Error(`${argv[0]} ended quietly`),
      (e: unknown) => e,
    );
    await vi.waitFor(() => expect(lines()).toHaveLength(1));
    await first.close();
    const second = await startTestHost({ dbPath, port, tokens });
    cleanups.push(() => second.close());
    const err = await Promise.race([
      done,
      new Promise((resolve) => setTimeout(() => resolve(new Error(`${argv[0]} still waiting`)), 5000)),
    ]);
    expect(signalListeners()).toEqual(before);
    return { err: err as SessionmuxError, url: first.wsUrl };
  }

  for (const argv of [["follow", "rf-a"], ["control"]]) {
    it(`ends ${argv[0]} with unauthorized, as at the first connect, instead of waiting silently`, async () => {
      const { err, url } = await restartedWith(argv, [{ name: "admin", secret: "rotated", admin: true }]);
      expect(err).toBeInstanceOf(SessionmuxError);
      expect(err.code).toBe("unauthorized");
      expect(err.message).toBe(
        `the host at ${url} refused the token (HTTP 401); check --token or SESSIONMUX_TOKEN`,
      );
    }, 15_000);
  }
});

describe("a reconnect to a wrong path", () => {
  it("ends follow with not_found, as at the first connect", async () => {
    const wrongPath = await refusing(404);
    let target = host.port;
    const proxy = await startTcpProxy(() => target);
    cleanups.push(() => proxy.stop());
    await host.host.call(ADMIN, "session.create", { sessionId: "wp-a" });
    const url = `ws://127.0.0.1:${proxy.port}/api/remote.mux`;
    const done = run(["follow", "wp-a"], ["--url", url, "--token", ADMIN_TOKEN, "--timeout", "500"]).then(
      () => new Error("follow ended quietly"),
      (e: unknown) => e,
    );
    await vi.waitFor(() => expect(lines()).toHaveLength(1));
    target = Number(new URL(wrongPath).port);
    proxy.cutAll();
    const err = (await Promise.race([
      done,
      new Promise((resolve) => setTimeout(() => resolve(new Error("follow still waiting")), 5000)),
    ])) as SessionmuxError;
    expect(err.code).toBe("not_found");
    expect(err.message).toBe(`no sessionmux mux at ${url} (HTTP 404); the path is /api/remote.mux`);
  }, 15_000);
});
