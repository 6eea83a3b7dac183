import { type Command, Option } from "commander";
import { controlMirror } from "../client/control-mirror.js";
import { followSession } from "../client/follow-session.js";
import { integer } from "./cli-options.js";
import { type ConnectOptions, oneShot, streamUntilDone, withConnection } from "./client-connection.js";
import { eventLine, jsonLine } from "./json-line.js";
import { registerLifecycleCommands } from "./lifecycle-commands.js";
import { registerOperatorCommands } from "./operator-commands.js";

/**
 * Registers the scripted client commands: follow, prompt, list, page, create, control, answer,
 * cancel, rename, fork, search, clear, delete.
 */
export function registerClientCommands(program: Command): void {
  registerFollow(program);
  registerPrompt(program);
  registerList(program);
  registerPage(program);
  registerCreate(program);
  registerControl(program);
  registerOperatorCommands(program);
  registerLifecycleCommands(program);
}

interface FollowCliOptions extends ConnectOptions {
  after: number;
  epoch?: string;
  until?: number;
  onReset: "continue" | "exit";
}

function registerFollow(program: Command): void {
  withConnection(program.command("follow <sessionId>"))
    .description(
      "print the session's events as JSON lines {seq,type,at,data}, resuming silently across disconnects. " +
        "After a history clear (reset) the new epoch's events print from seq 1 and a note goes to stderr",
    )
    .option("--after <seq>", "start after this seq", integer("--after", 0), 0)
    .option("--epoch <epoch>", "the epoch --after belongs to (a stale one replays from seq 1)")
    .option(
      "--until <seq>",
      "exit 0 once this seq has been printed (at once if --after is at or past it)",
      integer("--until", 1),
    )
    .addOption(
      new Option("--on-reset <policy>", "what to do when history is cleared")
        .choices(["continue", "exit"])
        .default("continue"),
    )
    .action((sessionId: string, options: FollowCliOptions) =>
      streamUntilDone(options, (client, finish) =>
        followSession(client, sessionId, {
          afterSeq: options.after,
          ...(options.epoch !== undefined ? { epoch: options.epoch } : {}),
        }).subscribe({
          next: (update) => {
            if (update.kind === "reset") {
              process.stderr.write(`reset: history cleared, new epoch ${update.epoch}\n`);
              if (options.onReset === "exit") {
                process.exitCode = 3;
                finish();
              }
              return;
            }
            // --after at or past --until in the epoch it names: nothing is left to print (a stale
            // --epoch is answered by a reset, which replays from seq 1)
            if (
              update.kind === "opened" &&
              options.until !== undefined &&
              update.cursor.seq >= options.until &&
              (options.epoch === undefined || options.epoch === update.epoch)
            )
              return finish();
            if (update.kind !== "events") return;
            for (const event of update.events) {
              process.stdout.write(eventLine(event));
              if (options.until !== undefined && event.seq >= options.until) return finish();
            }
          },
          error: (error: unknown) => finish(error),
          complete: () => finish(),
        }),
      ),
    );
}

function registerPrompt(program: Command): void {
  withConnection(program.command("prompt <sessionId> <text>"))
    .description("send a prompt (exactly once, even across reconnects) and print the result")
    .option("--client-message-id <id>", "idempotency key (default: a fresh one)")
    .action((sessionId: string, text: string, options: ConnectOptions & { clientMessageId?: string }) =>
      oneShot(options, (client) =>
        client.prompt({
          sessionId,
          text,
          ...(options.clientMessageId !== undefined ? { clientMessageId: options.clientMessageId } : {}),
        }),
      ),
    );
}

function registerList(program: Command): void {
  withConnection(program.command("list"))
    .description("print the session list, newest first")
    .option("--limit <n>", "how many rows", integer("--limit", 1))
    .option("--parked", "only sessions waiting on the operator")
    .option("--before <cursor>", "the `next` cursor of a previous page")
    .action((options: ConnectOptions & { limit?: number; parked?: boolean; before?: string }) =>
      oneShot(options, (client) =>
        client.list({
          ...(options.limit !== undefined ? { limit: options.limit } : {}),
          ...(options.parked ? { parked: true } : {}),
          ...(options.before !== undefined ? { before: options.before } : {}),
        }),
      ),
    );
}

function registerPage(program: Command): void {
  withConnection(program.command("page <sessionId>"))
    .description("print one page of a session's log (default: the tail)")
    .option("--after <seq>", "events after this seq", integer("--after", 0))
    .option("--before <seq>", "events before this seq", integer("--before", 1))
    .option("--limit <n>", "how many events", integer("--limit", 1))
    .action(
      (sessionId: string, options: ConnectOptions & { after?: number; before?: number; limit?: number }) =>
        oneShot(options, (client) =>
          client.page({
            sessionId,
            ...(options.after !== undefined ? { afterSeq: options.after } : {}),
            ...(options.before !== undefined ? { beforeSeq: options.before } : {}),
            ...(options.limit !== undefined ? { limit: options.limit } : {}),
          }),
        ),
    );
}

function registerCreate(program: Command): void {
  withConnection(program.command("create"))
    .description("create a session and print its header")
    .option("--id <sessionId>", "session id (default: chosen by the host)")
    .option("--title <title>", "title")
    .option("--model <model>", "model")
    .action((options: ConnectOptions & { id?: string; title?: string; model?: string }) =>
      oneShot(options, (client) =>
        client.create({
          ...(options.id !== undefined ? { sessionId: options.id } : {}),
          ...(options.title !== undefined ? { title: options.title } : {}),
          ...(options.model !== undefined ? { model: options.model } : {}),
        }),
      ),
    );
}

function registerControl(program: Command): void {
  withConnection(program.command("control"))
    .description(
      "print every change of the live-state mirror as a JSON line (baseline, deltas, " +
        '{"kind":"stale"} while disconnected, {"kind":"generationChanged"} after a host restart, ' +
        '{"kind":"removed","sessionId"} for a session deleted)',
    )
    .action((options: ConnectOptions) =>
      streamUntilDone(options, (client, finish) =>
        controlMirror(client).subscribe({
          next: (mirror) => {
            const change = mirror.lastChange;
            if (change === undefined) return;
            if (change.kind === "baseline" && mirror.generationChanged) {
              process.stdout.write(jsonLine({ kind: "generationChanged", generation: mirror.generation }));
            }
            process.stdout.write(jsonLine(change));
          },
          error: (error: unknown) => finish(error),
          complete: () => finish(),
        }),
      ),
    );
}
