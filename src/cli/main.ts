#!/usr/bin/env node
import { Command, CommanderError } from "commander";
import { SessionmuxError } from "../../protocol/index.js";
import { StartupError } from "../operations/startup-error.js";
import { registerClientCommands } from "./client-commands.js";
import { registerMigrateCommand } from "./migrate-command.js";
import { registerOperationsCommands } from "./operations-commands.js";
import { registerServeCommand } from "./serve-command.js";

const program = new Command()
  .name("sessionmux")
  .description("durable history and one live connection for AI-agent chat sessions")
  .version("0.1.0")
  .showHelpAfterError();

registerServeCommand(program);
registerMigrateCommand(program);
registerOperationsCommands(program);
registerClientCommands(program);

program.parseAsync(process.argv).catch((err: unknown) => {
  if (err instanceof CommanderError) process.exit(err.exitCode);
  if (err instanceof SessionmuxError || err instanceof StartupError) {
    process.stderr.write(`error: ${err.code}: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
