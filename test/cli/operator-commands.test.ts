import { Command, CommanderError } from "commander";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { registerClientCommands } from "../../src/cli/client-commands.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { capturedOutput, clientCommands, commandCleanups } from "./in-process-command.js";

/**
 * `answer` and `cancel` run in this process against a real host on 127.0.0.1 with the demo agent,
 * the session set up and read back with the other client commands.
 */

let host: TestHost;
beforeAll(async () => {
  host = await startTestHost();
});
afterAll(async () => {
  await host?.dispose();
});

const { stdout } = capturedOutput();
commandCleanups();

const { run, oneShot } = clientCommands(stdout, () => host.url, ADMIN_TOKEN);

interface LoggedEvent {
  seq: number;
  type: string;
  data: Record<string, unknown>;
}

const events = async (sessionId: string) =>
  ((await oneShot(["page", sessionId, "--after", "0"])) as { events: LoggedEvent[] }).events;

/** Waits until the session's log holds an event of `type`, and returns it. */
async function logged(sessionId: string, type: string): Promise<LoggedEvent> {
  return vi.waitFor(
    async () => {
      const found = (await events(sessionId)).find((e) => e.type === type);
      if (!found) throw new Error(`no ${type} yet`);
      return found;
    },
    { timeout: 10_000, interval: 50 },
  );
}

async function sessionWith(prompt: string): Promise<string> {
  const { header } = (await oneShot(["create"])) as { header: { sessionId: string } };
  await oneShot(["prompt", header.sessionId, prompt]);
  return header.sessionId;
}

describe("answer", () => {
  it("approves a pending approval once; a second answer is refused naming interaction_already_resolved", async () => {
    const sessionId = await sessionWith("/approve deploy prod");
    const requested = await logged(sessionId, "interaction/requested");
    const interactionId = requested.data.interactionId as string;
    expect(await oneShot(["answer", interactionId, "approve"])).toEqual({ resolved: true });
    const resolved = await logged(sessionId, "interaction/resolved");
    expect(resolved.data).toEqual({ interactionId, resolution: { outcome: "approve" } });

    const late = await run(["answer", interactionId, "deny"]).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(late).toBeInstanceOf(SessionmuxError);
    expect((late as SessionmuxError).code).toBe("interaction_already_resolved");
    expect((await events(sessionId)).filter((e) => e.type === "interaction/resolved")).toHaveLength(1);
  });

  it("answers a question with --text", async () => {
    const sessionId = await sessionWith("/ask Which region?");
    const requested = await logged(sessionId, "interaction/requested");
    const interactionId = requested.data.interactionId as string;
    expect(await oneShot(["answer", interactionId, "--text", "eu-west"])).toEqual({ resolved: true });
    expect((await logged(sessionId, "interaction/resolved")).data).toEqual({
      interactionId,
      resolution: { answer: "eu-west" },
    });
  });

  it("refuses, before connecting, neither or both of a decision and --text, and a decision other than approve or deny", async () => {
    // nothing listens there: a command that tried to connect would fail another way
    const nowhere = ["--url", "ws://127.0.0.1:9/api/remote.mux", "--token", ADMIN_TOKEN];
    for (const argv of [
      ["answer", "i1"],
      ["answer", "i1", "approve", "--text", "yes"],
    ]) {
      const refusal = await run(argv, nowhere).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(refusal, argv.join(" ")).toBeInstanceOf(CommanderError);
      expect((refusal as CommanderError).code).toBe("sessionmux.answerForm");
      expect((refusal as CommanderError).message).toContain("give either approve or deny");
    }
    const choice = await run(["answer", "i1", "maybe"], nowhere).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect((choice as CommanderError).code).toBe("commander.invalidArgument");
  });
});

describe("cancel", () => {
  it("stops a running turn, which ends cancelled; with none running it says so", async () => {
    const sessionId = await sessionWith("/sleep 60000");
    const start = await logged(sessionId, "turn/start");
    expect(await oneShot(["cancel", sessionId])).toEqual({ cancelled: true });
    const end = await logged(sessionId, "turn/end");
    expect(end.data).toMatchObject({ turnId: start.data.turnId, state: "cancelled" });
    expect(await oneShot(["cancel", sessionId])).toEqual({ cancelled: false });
  });
});

describe("--help", () => {
  it("says what answer and cancel do, what they print, and what each argument and flag takes", () => {
    const program = new Command();
    registerClientCommands(program);
    const described = (name: string) => program.commands.find((c) => c.name() === name);
    const answer = described("answer");
    expect(answer?.description()).toBe(
      "answer a pending approval (approve or deny) or question (--text) and print the result; " +
        "the first answer from anywhere wins, a later one fails with interaction_already_resolved",
    );
    expect(answer?.registeredArguments.map((a) => [a.name(), a.description, a.argChoices])).toEqual([
      ["interactionId", "the interaction's id, as control shows it", undefined],
      ["decision", "an approval's outcome", ["approve", "deny"]],
    ]);
    expect(answer?.options.find((o) => o.long === "--text")?.description).toBe("a question's answer");
    const cancel = described("cancel");
    expect(cancel?.description()).toBe(
      'stop the session\'s running turn and print {"cancelled":true}, or {"cancelled":false} when none runs',
    );
    expect(cancel?.registeredArguments.map((a) => a.name())).toEqual(["sessionId"]);
  });
});
