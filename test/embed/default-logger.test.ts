import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";

const run = promisify(execFile);
const cleanups = cleanupsAfterEach();

describe("createSessionmux without a logger", () => {
  it("writes an agent that threw to stderr, as a pino error line, and nothing under warn", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const fixture = new URL("./fixtures/throwing-agent-host.ts", import.meta.url).pathname;
    const { stdout, stderr } = await run(
      process.execPath,
      ["--import", "tsx", fixture, dir.file("sessions.db")],
      { timeout: 120_000 },
    );
    // the turn failed as the app sees it
    expect(JSON.parse(stdout)).toMatchObject({ state: "failed" });
    const lines = stderr
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines).toContainEqual(
      expect.objectContaining({
        level: 50,
        app: "sessionmux",
        msg: "agent threw during a turn",
        sessionId: "broken",
        agent: "broken",
        err: expect.objectContaining({ message: "the model provider refused the key" }),
      }),
    );
    // warnings and errors only: no start-up or shutdown chatter on the app's stderr
    expect(lines.filter((line) => (line.level as number) < 40)).toEqual([]);
  }, 150_000);
});
