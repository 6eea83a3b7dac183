import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { eventLine, jsonLine } from "../../src/cli/json-line.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";

let host: TestHost;
beforeAll(async () => {
  host = await startTestHost();
});
afterAll(async () => {
  await host?.dispose();
});

interface Run {
  child: ChildProcess;
  lines: string[];
  stderr: () => string;
  exit: Promise<number | null>;
}

function cli(
  args: string[],
  env: Record<string, string | undefined> = { SESSIONMUX_TOKEN: ADMIN_TOKEN },
): Run {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "src/cli/main.ts", ...args, "--url", host.wsUrl],
    {
      cwd: process.cwd(),
      env: { ...process.env, SESSIONMUX_TOKEN: undefined, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  const lines: string[] = [];
  let partial = "";
  let err = "";
  child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
    const parts = (partial + chunk).split("\n");
    partial = parts.pop() ?? "";
    lines.push(...parts);
  });
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
    err += chunk;
  });
  const exit = once(child, "exit").then(([code]) => code as number | null);
  return { child, lines, stderr: () => err, exit };
}

async function oneShot(args: string[]): Promise<unknown> {
  const run = cli(args);
  const code = await run.exit;
  expect(code, run.stderr()).toBe(0);
  expect(run.lines).toHaveLength(1);
  return JSON.parse(run.lines[0]!);
}

describe("JSON lines", () => {
  it("prints events with keys in the order seq, type, at, data", () => {
    const event = { data: { title: "x" }, at: 5, type: "session/renamed", seq: 3 } as unknown as SessionEvent;
    expect(eventLine(event)).toBe('{"seq":3,"type":"session/renamed","at":5,"data":{"title":"x"}}\n');
  });

  it("encodes binary data as base64", () => {
    expect(jsonLine({ bytes: new Uint8Array([0, 255, 1]) })).toBe('{"bytes":"AP8B"}\n');
    const view = new Uint8Array([9, 9, 104, 105]).subarray(2);
    expect(jsonLine(view)).toBe('"aGk="\n');
  });
});

describe("sessionmux client commands", () => {
  it("create, prompt, list and page talk to the host and print one JSON line each", async () => {
    const created = (await oneShot(["create", "--id", "cli-a", "--title", "From the CLI"])) as {
      header: { sessionId: string; title: string };
    };
    expect(created.header).toMatchObject({ sessionId: "cli-a", title: "From the CLI" });

    const prompted = (await oneShot(["prompt", "cli-a", "hello there"])) as { queued: boolean; seq: number };
    expect(prompted).toMatchObject({ queued: false });
    expect(prompted.seq).toBeGreaterThan(1);

    const listed = (await oneShot(["list", "--limit", "10"])) as { sessions: { sessionId: string }[] };
    expect(listed.sessions.map((s) => s.sessionId)).toContain("cli-a");

    const page = (await oneShot(["page", "cli-a", "--after", "0"])) as {
      events: { seq: number; type: string }[];
    };
    expect(page.events[0]).toMatchObject({ seq: 1, type: "session/created" });
    expect(page.events.find((e) => e.seq === prompted.seq)?.type).toBe("user/message");
  });

  it("follow --until prints exactly the committed events once each, then exits 0", async () => {
    await host.host.call({ name: "admin", admin: true }, "session.create", { sessionId: "cli-f" });
    const events = Array.from({ length: 40 }, (_, i) => ({
      type: "session/renamed" as const,
      data: { title: `t${i}` },
    }));
    await host.store.append("cli-f", events.slice(0, 20));
    const run = cli(["follow", "cli-f", "--after", "5", "--until", "41"]);
    await vi.waitFor(() => expect(run.lines.length).toBeGreaterThanOrEqual(16), { timeout: 20_000 });
    await host.store.append("cli-f", events.slice(20));
    expect(await run.exit).toBe(0);
    const page = await host.store.page("cli-f", { afterSeq: 5, limit: 100 });
    if (page.status !== "ok") throw new Error(page.status);
    expect(run.lines).toEqual(page.events.map((e) => eventLine(e as SessionEvent).trimEnd()));
    expect(run.lines.map((l) => (JSON.parse(l) as { seq: number }).seq)).toEqual(
      Array.from({ length: 36 }, (_, i) => i + 6),
    );
  });

  it("follow of an unknown session exits non-zero with the error code on stderr", async () => {
    const run = cli(["follow", "no-such-session"]);
    expect(await run.exit).not.toBe(0);
    expect(run.stderr()).toContain("session_not_found");
    expect(run.lines).toEqual([]);
  });

  it("a wrong token fails with unauthorized instead of retrying forever", async () => {
    const run = cli(["list"], { SESSIONMUX_TOKEN: "wrong" });
    expect(await run.exit).not.toBe(0);
    expect(run.stderr()).toContain("unauthorized");
  });

  it("a missing token is refused before connecting", async () => {
    const run = cli(["list"], {});
    expect(await run.exit).not.toBe(0);
    expect(run.stderr()).toMatch(/SESSIONMUX_TOKEN/);
  });

  it("control prints the baseline, then live changes, as JSON lines", async () => {
    const run = cli(["control"]);
    try {
      await vi.waitFor(() => expect(run.lines.length).toBeGreaterThanOrEqual(1), { timeout: 20_000 });
      expect(JSON.parse(run.lines[0]!)).toMatchObject({ kind: "baseline", generation: host.host.generation });
      await host.host.call({ name: "admin", admin: true }, "session.create", { sessionId: "cli-c" });
      await host.host.call({ name: "admin", admin: true }, "session.prompt", {
        sessionId: "cli-c",
        text: "hi",
        clientMessageId: "cli-c-1",
      });
      await vi.waitFor(
        () => {
          const kinds = run.lines.slice(1).map((l) => (JSON.parse(l) as { kind: string }).kind);
          expect(kinds).toContain("agent");
        },
        { timeout: 20_000 },
      );
    } finally {
      run.child.kill("SIGTERM");
    }
    expect(await run.exit).toBe(0);
  });
});
