import { describe, expect, test } from "vitest";
import { parseDemoCommand } from "../../src/agents/demo-command.js";

describe("parseDemoCommand", () => {
  test("plain text, an unknown command or a command not at the start is text, kept as typed", () => {
    for (const text of ["hello", "  hi there ", "/unknown 3", "/stream3", "say /fail", "/fail!", "/", ""]) {
      expect(parseDemoCommand(text)).toEqual({ kind: "text", text });
    }
  });

  test("/stream N ms takes both numbers, and defaults to 5 chunks 10 ms apart when they are left out", () => {
    expect(parseDemoCommand("/stream 3 20")).toEqual({ kind: "stream", count: 3, ms: 20 });
    expect(parseDemoCommand("/stream 7")).toEqual({ kind: "stream", count: 7, ms: 10 });
    expect(parseDemoCommand("/stream")).toEqual({ kind: "stream", count: 5, ms: 10 });
    expect(parseDemoCommand("  /stream  ")).toEqual({ kind: "stream", count: 5, ms: 10 });
    expect(parseDemoCommand("/stream\n4\t 30")).toEqual({ kind: "stream", count: 4, ms: 30 });
  });

  test("/stream rounds down, and clamps to 0..100000 chunks and 0..600000 ms", () => {
    expect(parseDemoCommand("/stream 2.9 5.9")).toEqual({ kind: "stream", count: 2, ms: 5 });
    expect(parseDemoCommand("/stream -4 -1")).toEqual({ kind: "stream", count: 0, ms: 0 });
    expect(parseDemoCommand("/stream 100000 600000")).toEqual({
      kind: "stream",
      count: 100_000,
      ms: 600_000,
    });
    expect(parseDemoCommand("/stream 100001 600001")).toEqual({
      kind: "stream",
      count: 100_000,
      ms: 600_000,
    });
    expect(parseDemoCommand("/stream 0 0")).toEqual({ kind: "stream", count: 0, ms: 0 });
  });

  test("/stream falls back to its defaults for a number it cannot read or an infinite one", () => {
    expect(parseDemoCommand("/stream many slow")).toEqual({ kind: "stream", count: 5, ms: 10 });
    expect(parseDemoCommand("/stream Infinity -Infinity")).toEqual({ kind: "stream", count: 5, ms: 10 });
  });

  test("/approve and /ask take the rest of the line, with a default when it is empty", () => {
    expect(parseDemoCommand("/approve deploy  to prod ")).toEqual({
      kind: "approve",
      action: "deploy  to prod",
    });
    expect(parseDemoCommand("/approve")).toEqual({ kind: "approve", action: "proceed" });
    expect(parseDemoCommand("/approve   ")).toEqual({ kind: "approve", action: "proceed" });
    expect(parseDemoCommand("/ask Which\nregion?")).toEqual({ kind: "ask", question: "Which\nregion?" });
    expect(parseDemoCommand("/ask")).toEqual({ kind: "ask", question: "Continue?" });
  });

  test("/job N runs N seconds (fractions kept), 1 s by default, clamped to 0..600 s", () => {
    expect(parseDemoCommand("/job 3")).toEqual({ kind: "job", seconds: 3 });
    expect(parseDemoCommand("/job 2.5")).toEqual({ kind: "job", seconds: 2.5 });
    expect(parseDemoCommand("/job")).toEqual({ kind: "job", seconds: 1 });
    expect(parseDemoCommand("/job soon")).toEqual({ kind: "job", seconds: 1 });
    expect(parseDemoCommand("/job 0")).toEqual({ kind: "job", seconds: 1 });
    expect(parseDemoCommand("/job -5")).toEqual({ kind: "job", seconds: 0 });
    expect(parseDemoCommand("/job 600")).toEqual({ kind: "job", seconds: 600 });
    expect(parseDemoCommand("/job 601")).toEqual({ kind: "job", seconds: 600 });
  });

  test("/sleep ms waits ms, 1000 by default, clamped to 0..600000; /fail ignores what follows", () => {
    expect(parseDemoCommand("/sleep 250")).toEqual({ kind: "sleep", ms: 250 });
    expect(parseDemoCommand("/sleep")).toEqual({ kind: "sleep", ms: 1000 });
    expect(parseDemoCommand("/sleep -3")).toEqual({ kind: "sleep", ms: 0 });
    expect(parseDemoCommand("/sleep 700000")).toEqual({ kind: "sleep", ms: 600_000 });
    expect(parseDemoCommand("/fail")).toEqual({ kind: "fail" });
    expect(parseDemoCommand(" /fail now please")).toEqual({ kind: "fail" });
  });
});
