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
      expect(started.stderr).toMatch(/--port must be an integer ≥ 0 in decimal digits, got "/);
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
});
