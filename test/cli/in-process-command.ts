import { Command } from "commander";
import { vi } from "vitest";
import { registerServeCommand } from "../../src/cli/serve-command.js";

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
