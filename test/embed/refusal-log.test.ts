import type { IncomingMessage } from "node:http";
import { afterEach, describe, expect, it, vi } from "vitest";
import { RefusalLog } from "../../src/embed/refusal-log.js";
import { capturedLogger } from "../support/log-capture.js";

describe("RefusalLog", () => {
  it("logs at most its quota per window and counts what it left out", async () => {
    const { logger, lines } = capturedLogger();
    let now = 0;
    const log = new RefusalLog(logger, 3, 1_000, () => now);
    const req = { socket: { remoteAddress: "127.0.0.1" }, url: "/api/x" } as unknown as IncomingMessage;
    for (let i = 0; i < 1_000; i++) log.refused(req, "unauthorized");
    now = 1_000;
    log.refused(req, "forbidden_origin");
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines.map((l) => [l.msg, l.code, l.suppressedBefore])).toEqual([
      ["request refused", "unauthorized", undefined],
      ["request refused", "unauthorized", undefined],
      ["request refused", "unauthorized", undefined],
      ["request refused", "forbidden_origin", 997],
    ]);
    expect(lines[0]).toMatchObject({ remote: "127.0.0.1", path: "/api/x" });
  });

  it("logs a refused request's path without its query string, where an app's token may travel", async () => {
    const { logger, lines } = capturedLogger();
    const log = new RefusalLog(logger);
    const req = {
      socket: { remoteAddress: "127.0.0.1" },
      url: "/chat/api/remote.mux?token=expired-secret-1&x=1",
    } as unknown as IncomingMessage;
    log.refused(req, "unauthorized");
    log.write("error", { path: "/v1/sessions?access_token=secret-2" }, "authenticate threw; request refused");
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines.map((l) => l.path)).toEqual(["/chat/api/remote.mux?…", "/v1/sessions?…"]);
    expect(JSON.stringify(lines)).not.toMatch(/secret/);
  });

  it("starts a new window when its clock went back, rather than logging nothing until it caught up", async () => {
    const { logger, lines } = capturedLogger();
    let now = 10 * 3_600_000;
    const log = new RefusalLog(logger, 1, 1_000, () => now);
    const req = { socket: { remoteAddress: "127.0.0.1" }, url: "/api/x" } as unknown as IncomingMessage;
    log.refused(req, "unauthorized");
    log.refused(req, "unauthorized");
    now -= 3_600_000;
    log.refused(req, "forbidden_origin");
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines.map((l) => [l.code, l.suppressedBefore])).toEqual([
      ["unauthorized", undefined],
      ["forbidden_origin", 1],
    ]);
  });

  describe("on its default clock", () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    it("reads performance.now(): the window a refusal falls in moves with it", async () => {
      vi.useFakeTimers({ toFake: ["performance"] });
      const { logger, lines } = capturedLogger();
      const log = new RefusalLog(logger, 1, 1_000);
      const req = { socket: { remoteAddress: "127.0.0.1" }, url: "/api/x" } as unknown as IncomingMessage;
      log.refused(req, "unauthorized");
      log.refused(req, "unauthorized");
      vi.advanceTimersByTime(999);
      log.refused(req, "unauthorized");
      vi.advanceTimersByTime(1);
      log.refused(req, "forbidden_origin");
      vi.useRealTimers();
      await new Promise((resolve) => setImmediate(resolve));
      expect(lines.map((l) => [l.code, l.suppressedBefore])).toEqual([
        ["unauthorized", undefined],
        ["forbidden_origin", 2],
      ]);
    });
  });
});
