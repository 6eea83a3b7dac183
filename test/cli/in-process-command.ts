import { Command } from "commander";
import { beforeEach, vi } from "vitest";
import { registerClientCommands } from "../../src/cli/client-commands.js";
import { registerServeCommand } from "../../src/cli/serve-command.js";
import { type Cleanup, cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";

/**
 * A program to register commands on in a test's own process: commander throws its refusals
 * (`exitOverride`) instead of exiting, and prints nothing of its own, so a test reads them.
 */
export const quietProgram = (): Command =>
  new Command().exitOverride().configureOutput({ writeErr: () => {}, writeOut: () => {} });

/** `serve`'s options for these arguments and variables, parsed in this process without starting a host. */
export function parseServe(argv: string[], env: Record<string, string> = {}): Record<string, unknown> {
  for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
  const program = quietProgram();
  registerServeCommand(program);
  const serve = program.commands.find((c) => c.name() === "serve");
  if (!serve) throw new Error("no serve command");
  serve.action(() => {});
  program.parse(["serve", ...argv], { from: "user" });
  return serve.opts();
}

/**
 * The client commands run in this process against a host: `run` parses one command line, by
 * default with the host's `--url` and the token given; `oneShot` answers the JSON line a one-shot
 * command printed to `stdout` (as `capturedOutput` collects it).
 */
export function clientCommands(
  stdout: string[],
  url: () => string,
  token: string,
): {
  run(argv: string[], connection?: string[]): Promise<Command>;
  oneShot(argv: string[]): Promise<Record<string, unknown>>;
} {
  const run = (argv: string[], connection = ["--url", url(), "--token", token]) => {
    const program = quietProgram();
    registerClientCommands(program);
    return program.parseAsync([...argv, ...connection], { from: "user" });
  };
  const oneShot = async (argv: string[]) => {
    const written = stdout.length;
    await run(argv);
    return JSON.parse(stdout.slice(written).join("")) as Record<string, unknown>;
  };
  return { run, oneShot };
}

/**
 * What commands run in this process write to stdout and stderr, captured afresh before each test
 * (the file's `afterEach` restores the streams with `vi.restoreAllMocks`); no `SESSIONMUX_`
 * variable of the machine reaches the commands. Empty a list in place to read what comes next.
 */
export function capturedOutput(): { stdout: string[]; stderr: string[] } {
  const captured = { stdout: [] as string[], stderr: [] as string[] };
  beforeEach(() => {
    captured.stdout.length = 0;
    captured.stderr.length = 0;
    for (const name of Object.keys(process.env))
      if (name.startsWith("SESSIONMUX_")) vi.stubEnv(name, undefined);
    vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
      captured.stdout.push(String(chunk));
      return true;
    });
    vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
      captured.stderr.push(String(chunk));
      return true;
    });
  });
  return captured;
}

/**
 * What a test of commands run in this process opened, undone after it (the last first), then its
 * spies and stubbed variables restored; `folder()` is a temp folder removed with the rest.
 */
export function commandCleanups(): { cleanups: Cleanup[]; folder(): ReturnType<typeof tempDir> } {
  const cleanups = cleanupsAfterEach(() => {
    vi.restoreAllMocks();
    vi.unstubAllEnvs();
  });
  const folder = () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    return dir;
  };
  return { cleanups, folder };
}
