import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { capturedOutput, clientCommands, commandCleanups } from "./in-process-command.js";

/**
 * `rename`, `fork`, `search`, `clear` and `delete` run in this process against a real host on
 * 127.0.0.1 with the demo agent; what they did is read back with `page` and `list`.
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

async function refusal(argv: string[]): Promise<string> {
  const written = stdout.length;
  const error = await run(argv).then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(SessionmuxError);
  expect(stdout.length).toBe(written);
  return (error as SessionmuxError).code;
}

interface LoggedEvent {
  seq: number;
  type: string;
  data: Record<string, unknown>;
}

const log = async (sessionId: string) =>
  (await oneShot(["page", sessionId, "--after", "0"])) as { events: LoggedEvent[]; epoch: string };

/** A session whose first turn, `text`, has ended. */
async function answered(sessionId: string, text: string): Promise<LoggedEvent[]> {
  await oneShot(["create", "--id", sessionId]);
  await oneShot(["prompt", sessionId, text]);
  return vi.waitFor(
    async () => {
      const { events } = await log(sessionId);
      if (!events.some((e) => e.type === "turn/end")) throw new Error("turn still running");
      return events;
    },
    { timeout: 10_000, interval: 50 },
  );
}

describe("rename", () => {
  it("sets the title, prints the seq of its session/renamed, and the list shows it", async () => {
    await oneShot(["create", "--id", "cli-rename", "--title", "before"]);
    const { seq } = (await oneShot(["rename", "cli-rename", "after the rename"])) as { seq: number };
    const renamed = (await log("cli-rename")).events.find((e) => e.seq === seq);
    expect(renamed).toMatchObject({ type: "session/renamed", data: { title: "after the rename" } });
    const { sessions } = (await oneShot(["list"])) as { sessions: { sessionId: string; title: string }[] };
    expect(sessions.find((s) => s.sessionId === "cli-rename")?.title).toBe("after the rename");
    expect(await refusal(["rename", "cli-no-such", "x"])).toBe("session_not_found");
  });

  it("refuses a title of only whitespace with bad_request, printing nothing and keeping the title", async () => {
    await oneShot(["create", "--id", "cli-rename-blank", "--title", "kept"]);
    const before = (await log("cli-rename-blank")).events;
    expect(await refusal(["rename", "cli-rename-blank", " \t "])).toBe("bad_request");
    expect(await refusal(["create", "--id", "cli-create-blank", "--title", "  "])).toBe("bad_request");
    expect((await log("cli-rename-blank")).events).toEqual(before);
    const { sessions } = (await oneShot(["list"])) as { sessions: { sessionId: string; title: string }[] };
    expect(sessions.find((s) => s.sessionId === "cli-rename-blank")?.title).toBe("kept");
    expect(sessions.some((s) => s.sessionId === "cli-create-blank")).toBe(false);
  });
});

describe("fork", () => {
  it("copies the log up to --at into a new session with the --id given, the source unchanged", async () => {
    const source = await answered("cli-fork-src", "/stream 3 1");
    const userMessage = source.find((e) => e.type === "user/message")!;
    const { header } = (await oneShot([
      "fork",
      "cli-fork-src",
      "--at",
      String(userMessage.seq),
      "--id",
      "cli-fork",
    ])) as {
      header: { sessionId: string };
    };
    expect(header.sessionId).toBe("cli-fork");
    const copied = (await log("cli-fork")).events;
    expect(copied[0]).toMatchObject({
      type: "session/created",
      data: { forkOf: { sessionId: "cli-fork-src", seq: userMessage.seq } },
    });
    // the copy stops at the user message: its turn is closed as interrupted, no answer copied
    expect(copied.map((e) => e.type)).toEqual(["session/created", "turn/start", "user/message", "turn/end"]);
    expect(copied.at(-1)!.data).toMatchObject({ state: "interrupted" });
    expect((await log("cli-fork-src")).events).toEqual(source);
  });

  it("without --at copies the whole log under an id the host picks", async () => {
    const source = await answered("cli-fork-whole", "hello there");
    const { header } = (await oneShot(["fork", "cli-fork-whole"])) as { header: { sessionId: string } };
    expect(header.sessionId).not.toBe("cli-fork-whole");
    const copied = (await log(header.sessionId)).events;
    expect(copied.slice(1).map((e) => [e.type, e.data])).toEqual(
      source.filter((e) => e.type !== "session/created").map((e) => [e.type, e.data]),
    );
    expect(await refusal(["fork", "cli-no-such"])).toBe("session_not_found");
  });
});

describe("search", () => {
  it("prints the messages that hold the words, with their sessions, at most --limit", async () => {
    await answered("cli-search-a", "the quokka census");
    await answered("cli-search-b", "a second quokka sighting");
    const { hits } = (await oneShot(["search", "quokka"])) as {
      hits: { sessionId: string; snippet: string }[];
    };
    // a hit per matching message: the prompt and the demo agent's echo of it
    expect([...new Set(hits.map((h) => h.sessionId))].sort()).toEqual(["cli-search-a", "cli-search-b"]);
    expect(hits.every((h) => h.snippet.includes("**quokka**"))).toBe(true);
    const one = (await oneShot(["search", "quokka", "--limit", "1"])) as { hits: unknown[] };
    expect(one.hits).toHaveLength(1);
  });
});

describe("clear", () => {
  it("empties the log into a new epoch, kept only while --epoch still names the current one", async () => {
    await answered("cli-clear", "to be cleared");
    const { epoch: first } = await log("cli-clear");
    expect(await refusal(["clear", "cli-clear", "--epoch", "not-the-epoch"])).toBe("epoch_mismatch");
    expect((await log("cli-clear")).epoch).toBe(first);
    const { epoch } = (await oneShot(["clear", "cli-clear", "--epoch", first])) as { epoch: string };
    expect(epoch).not.toBe(first);
    const after = await log("cli-clear");
    expect(after.epoch).toBe(epoch);
    expect(after.events.some((e) => e.type === "user/message")).toBe(false);
  });
});

describe("delete", () => {
  it("deletes the session for good: it leaves the list, its log is gone, and its id is not taken again", async () => {
    await answered("cli-delete", "short lived");
    expect(await oneShot(["delete", "cli-delete"])).toEqual({ deleted: true });
    const { sessions } = (await oneShot(["list"])) as { sessions: { sessionId: string }[] };
    expect(sessions.map((s) => s.sessionId)).not.toContain("cli-delete");
    expect(await refusal(["page", "cli-delete"])).toBe("session_retired");
    expect(await refusal(["create", "--id", "cli-delete"])).toBe("session_retired");
  });
});
