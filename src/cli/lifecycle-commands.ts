import type { Command } from "commander";
import { integer } from "./cli-options.js";
import { type ConnectOptions, oneShot, withConnection } from "./client-connection.js";

/**
 * What a script does to a session's life besides creating and prompting it: rename, fork, search,
 * clear and delete, each one call printed as the host answers it.
 */
export function registerLifecycleCommands(program: Command): void {
  withConnection(program.command("rename <sessionId> <title>"))
    .description('set the session\'s title and print {"seq"} of its session/renamed event')
    .action((sessionId: string, title: string, options: ConnectOptions) =>
      oneShot(options, (client) => client.call("session.rename", { sessionId, title })),
    );

  withConnection(program.command("fork <sourceId>"))
    .description(
      "copy the session's log (up to --at) into a new session and print its header; the source is only read",
    )
    .option("--at <seq>", "copy the events up to this seq (default: the head)", integer("--at", 0))
    .option("--id <sessionId>", "the new session's id (default: chosen by the host)")
    .action((sourceId: string, options: ConnectOptions & { at?: number; id?: string }) =>
      oneShot(options, (client) =>
        client.call("session.fork", {
          sourceId,
          ...(options.at !== undefined ? { atSeq: options.at } : {}),
          ...(options.id !== undefined ? { sessionId: options.id } : {}),
        }),
      ),
    );

  withConnection(program.command("search <query>"))
    .description("print the sessions whose messages match the query, best first, with a snippet each")
    .option("--limit <n>", "how many hits", integer("--limit", 1))
    .action((query: string, options: ConnectOptions & { limit?: number }) =>
      oneShot(options, (client) =>
        client.call("session.search", {
          query,
          ...(options.limit !== undefined ? { limit: options.limit } : {}),
        }),
      ),
    );

  withConnection(program.command("clear <sessionId>"))
    .description(
      'delete the session\'s history, keeping its id, and print {"epoch"} of its new log; ' +
        "refused with session_busy while a turn runs",
    )
    .option("--epoch <epoch>", "clear only if the log is still this epoch (else epoch_mismatch)")
    .action((sessionId: string, options: ConnectOptions & { epoch?: string }) =>
      oneShot(options, (client) =>
        client.call("session.clear", {
          sessionId,
          ...(options.epoch !== undefined ? { expectedEpoch: options.epoch } : {}),
        }),
      ),
    );

  withConnection(program.command("delete <sessionId>"))
    .description(
      'delete the session for good (its log, attachments and live state; its id is never reused) and print {"deleted":true}',
    )
    .action((sessionId: string, options: ConnectOptions) =>
      oneShot(options, (client) => client.call("session.delete", { sessionId })),
    );
}
