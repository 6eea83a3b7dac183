import { existsSync, writeFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { tempDir } from "../support/temp-dir.js";
import { runCli, startServe } from "./run-cli.js";

const dirs: { remove(): void }[] = [];
const stops: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
  for (const dir of dirs.splice(0)) dir.remove();
});

describe("sessionmux option values", () => {
  it("refuses an empty port (an unset variable in a compose file) instead of listening on a random one", async () => {
    const dir = tempDir();
    dirs.push(dir);
    const db = dir.file("sessions.db");
    for (const [args, env] of [
      [["--port", ""], {}],
      [[], { SESSIONMUX_PORT: "" }],
      [["--port", " "], {}],
      [["--port", "0x1F90"], {}],
    ] as const) {
      const started = await startServe([...args, "--db", db], { SESSIONMUX_HOST: "127.0.0.1", ...env });
      stops.push(started.stop);
      expect(started.stdout).not.toContain("listening on");
      expect(started.exited).toBe(1);
      expect(started.stderr).toMatch(/--port must be an integer from 0 to 65535 in decimal digits, got "/);
    }
  });

  it("refuses an empty or non-decimal count of a limit and of a client command", async () => {
    const limit = await runCli(["serve", "--max-queued-calls", "", "--db", "/nonexistent/x.db"]);
    expect(limit.code).toBe(1);
    expect(limit.stderr).toMatch(/--max-queued-calls must be an integer ≥ 0 in decimal digits, got ""/);
    const after = await runCli(["page", "s1", "--after", "1e3", "--token", "t"]);
    expect(after.code).toBe(1);
    expect(after.stderr).toMatch(/--after must be an integer ≥ 0 in decimal digits, got "1e3"/);
  });

  it("refuses a log level pino does not know, naming the choices, from the flag and from the variable", async () => {
    for (const [args, env] of [
      [["--log-level", "verbose"], {}],
      [[], { SESSIONMUX_LOG_LEVEL: "verbose" }],
    ] as const) {
      const refused = await runCli(["serve", ...args, "--db", "/nonexistent/x.db"], env);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(
        /--log-level <level>.*'verbose'.* is invalid\. Allowed choices are fatal, error, warn, info/,
      );
    }
  });

  it("refuses a tokens file that lists no token, or a bad entry, naming the file and line", async () => {
    const dir = tempDir();
    dirs.push(dir);
    const db = dir.file("sessions.db");
    const file = dir.file("tokens");
    // left empty by a failed deploy: the host minted an admin token of its own and started
    writeFileSync(file, "# alice=s3cret\n\n");
    const empty = await startServe(["--db", db, "--tokens-file", file], { SESSIONMUX_PORT: "0" });
    stops.push(empty.stop);
    expect(empty.stdout).not.toContain("listening on");
    expect(empty.exited).toBe(2);
    expect(empty.stderr).toBe(
      `error: tokens_file_invalid: --tokens-file ${file} lists no token (one name=secret or bare admin token per line)\n`,
    );
    expect(existsSync(dir.file("sessionmux.token"))).toBe(false);

    writeFileSync(file, "bob=fine\nalice=\n");
    const bad = await runCli(["serve", "--db", db, "--tokens-file", file, "--port", "0"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe(
      `error: tokens_file_invalid: --tokens-file ${file} line 2: alice=…: a secret is 1-4096 characters\n`,
    );
  });

  it("refuses a client --url that is no WebSocket URL at once, instead of waiting out --timeout for an answer", async () => {
    for (const url of ["localhost:8787", "ws://", "127.0.0.1:8787/api/remote.mux"]) {
      const refused = await runCli(["list", "--url", url, "--token", "t", "--timeout", "3000"]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(
        /^error: option '--url <url>' argument '.*' is invalid\. It must be a ws:\/\/ or wss:\/\/ URL, e\.g\. ws:\/\/127\.0\.0\.1:8787\/api\/remote\.mux, or the host's http:\/\/ or https:\/\/ address\n/,
      );
    }
  });

  it("refuses a port past 65535 before opening the database", async () => {
    const dir = tempDir();
    dirs.push(dir);
    const refused = await runCli(["serve", "--port", "65536", "--db", dir.file("sessions.db")]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /--port must be an integer from 0 to 65535 in decimal digits, got "65536"/,
    );
    expect(existsSync(dir.file("sessions.db"))).toBe(false);
  });
});
