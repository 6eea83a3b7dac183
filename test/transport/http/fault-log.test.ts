import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ALICE_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { api } from "./http-client.js";

let h: TestHost | undefined;
afterEach(async () => {
  await h?.dispose().catch(() => {});
  h = undefined;
});

/** A pino logger whose lines land in `lines`, parsed. */
function capturingLogger(): { logger: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: "error" }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { logger, lines };
}

describe("one logger: unexpected errors are logged once with their context", () => {
  it("an HTTP 500 is logged with its route; the client sees only internal_error", async () => {
    const { logger, lines } = capturingLogger();
    h = await startTestHost({ logger });
    // The store gone under a running host: a read fails with a fault, not an outcome.
    await h.store.close();
    const r = await api(h, "/v1/sessions/anything", { token: ALICE_TOKEN });
    expect(r.status).toBe(500);
    expect(r.json).toEqual({ error: "internal_error" });
    await vi.waitFor(() => expect(lines.some((l) => l.msg === "http internal error")).toBe(true));
    const line = lines.find((l) => l.msg === "http internal error")!;
    expect(line.route).toBe("GET /v1/sessions/:id");
    expect(line.err).toBeDefined();
    expect(lines.filter((l) => l.msg === "http internal error")).toHaveLength(1);
  });

  it("a throwing commit listener is reported to the store's logger, and delivery goes on", async () => {
    const { logger, lines } = capturingLogger();
    h = await startTestHost({ logger });
    let delivered = 0;
    h.store.subscribeAll(() => {
      throw new Error("listener bug");
    });
    h.store.subscribeAll(() => {
      delivered++;
    });
    const created = await h.store.create({ sessionId: "s1", owner: "admin", model: "demo" });
    expect(created.status).toBe("created");
    expect(delivered).toBeGreaterThan(0);
    await vi.waitFor(() => expect(lines.some((l) => l.msg === "a commit listener threw")).toBe(true));
    expect(lines.find((l) => l.msg === "a commit listener threw")?.sessionId).toBe("s1");
  });
});
