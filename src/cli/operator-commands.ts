import { Argument, type Command } from "commander";
import type { Resolution } from "../../protocol/index.js";
import { type ConnectOptions, oneShot, withConnection } from "./client-connection.js";

/**
 * What an operator does to a parked or runaway session from a script: answer what it waits for,
 * stop its turn. `control` (or `list --parked`) shows what waits.
 */
export function registerOperatorCommands(program: Command): void {
  registerAnswer(program);
  registerCancel(program);
}

interface AnswerCliOptions extends ConnectOptions {
  text?: string;
}

function registerAnswer(program: Command): void {
  withConnection(program.command("answer"))
    .description(
      "answer a pending approval (approve or deny) or question (--text) and print the result; " +
        "the first answer from anywhere wins, a later one fails with interaction_already_resolved",
    )
    .addArgument(new Argument("<interactionId>", "the interaction's id, as control shows it"))
    .addArgument(new Argument("[decision]", "an approval's outcome").choices(["approve", "deny"]))
    .option("--text <answer>", "a question's answer")
    .action(
      (
        interactionId: string,
        decision: "approve" | "deny" | undefined,
        options: AnswerCliOptions,
        command: Command,
      ) => {
        // refused before connecting: commander prints the usage error and exits 1
        if ((decision === undefined) === (options.text === undefined)) {
          command.error("error: give either approve or deny (an approval) or --text <answer> (a question)", {
            code: "sessionmux.answerForm",
          });
        }
        const response: Resolution =
          decision !== undefined ? { outcome: decision } : { answer: options.text! };
        return oneShot(options, (client) => client.call("session.respond", { interactionId, response }));
      },
    );
}

function registerCancel(program: Command): void {
  withConnection(program.command("cancel <sessionId>"))
    .description(
      'stop the session\'s running turn and print {"cancelled":true}, or {"cancelled":false} when none runs',
    )
    .action((sessionId: string, options: ConnectOptions) =>
      oneShot(options, (client) => client.call("session.cancel", { sessionId })),
    );
}
