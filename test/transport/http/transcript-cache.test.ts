import { afterEach, describe, expect, it } from "vitest";
import type { NewEvent } from "../../../protocol/index.js";
import { emptyTranscript } from "../../../protocol/transcript.js";
import { ADMIN } from "../../../src/host/principal.js";
import { readSessionTranscript, TranscriptCache } from "../../../src/transport/http/session-transcript.js";
import { type HostFixture, openHost } from "../../host/host-fixture.js";
import { turnEnd, turnStart } from "../../store/open-store.js";
import { readWholeLog } from "../../support/whole-log.js";

describe("TranscriptCache", () => {
  it("keeps the most recently read transcripts within its sessions and its bytes", () => {
    const cache = new TranscriptCache(3, 100);
    const t = emptyTranscript();
    cache.put("a", "e", t, 40);
    cache.put("b", "e", t, 40);
    expect(cache.dataBytes).toBe(80);
    cache.put("c", "e", t, 40); // over 100 bytes: the least recently read (a) goes
    expect(cache.get("a")).toBeUndefined();
    expect(cache.dataBytes).toBe(80);
    expect(cache.get("b")?.dataBytes).toBe(40); // b is now the most recent
    cache.put("d", "e", t, 40);
    expect(cache.get("c")).toBeUndefined();
    expect(cache.get("b")).toBeDefined();
    // a transcript over the whole budget is never kept, and evicts nothing
    cache.put("huge", "e", t, 101);
    expect(cache.get("huge")).toBeUndefined();
    expect([cache.get("b"), cache.get("d")].every(Boolean)).toBe(true);
    // a session read again replaces its own entry
    cache.put("b", "e2", t, 10);
    expect(cache.dataBytes).toBe(50);
    expect(cache.get("b")?.epoch).toBe("e2");
    // and the count bound holds on its own
    for (const id of ["x", "y", "z"]) cache.put(id, "e", t, 1);
    expect(["b", "d"].map((id) => cache.get(id))).toEqual([undefined, undefined]);
    expect(cache.dataBytes).toBe(3);
  });

  it("keeps data up to its budget exactly, one byte more is never kept; 32 MiB unless told", () => {
    const t = emptyTranscript();
    const cache = new TranscriptCache(3, 100);
    cache.put("a", "e", t, 60);
    cache.put("b", "e", t, 40); // 100 in all: both stay
    expect([cache.get("a"), cache.get("b")].every(Boolean)).toBe(true);
    expect(cache.dataBytes).toBe(100);
    cache.put("whole", "e", t, 100); // the whole budget alone: kept, the others go
    expect(cache.get("whole")?.dataBytes).toBe(100);
    expect([cache.get("a"), cache.get("b")]).toEqual([undefined, undefined]);

    const MIB = 1024 * 1024;
    const standard = new TranscriptCache();
    standard.put("at", "e", t, 32 * MIB);
    expect(standard.get("at")).toBeDefined();
    standard.put("past", "e", t, 32 * MIB + 1);
    expect(standard.get("past")).toBeUndefined();
    expect(standard.dataBytes).toBe(32 * MIB);
    for (let i = 0; i < 17; i++) standard.put(`s${i}`, "e", t, 1);
    expect(standard.get("s0")).toBeUndefined();
    expect(standard.get("s1")).toBeDefined();
    expect(standard.dataBytes).toBe(16);
  });
});

describe("readSessionTranscript with a cache", () => {
  let fx: HostFixture;
  afterEach(async () => fx?.dispose());

  const toolTurn = (turnId: string, kib: number): NewEvent[] => [
    turnStart(turnId),
    { type: "tool/call", data: { turnId, toolCallId: `${turnId}c`, name: "cat", args: {} } },
    {
      type: "tool/result",
      data: { turnId, toolCallId: `${turnId}c`, ok: true, result: "r".repeat(kib * 1024), durationMs: 1 },
    } as NewEvent,
    turnEnd(turnId),
  ];

  it("counts the stored data it folded, and does not keep a session over its byte budget", async () => {
    fx = await openHost();
    const cache = new TranscriptCache(16, 2 * 1024 * 1024);
    for (const id of ["small", "large"])
      await fx.store.create({ sessionId: id, owner: "admin", model: "demo-fast" });
    expect((await fx.store.append("small", toolTurn("s1", 10))).status).toBe("appended");
    for (let i = 0; i < 4; i++)
      expect((await fx.store.append("large", toolTurn(`l${i}`, 700))).status).toBe("appended");

    const small = await readSessionTranscript(fx.host, ADMIN, "small", { cache });
    const smallLog = await readWholeLog(fx.store, "small");
    if (smallLog.status !== "ok") throw new Error(smallLog.status);
    expect(small.transcript.lastSeq).toBe(smallLog.headSeq);
    expect(cache.dataBytes).toBe(smallLog.dataBytes);

    // 2.8 MiB of tool results: folded and answered in full, but not kept
    const large = await readSessionTranscript(fx.host, ADMIN, "large", { cache });
    const results = large.transcript.messages.flatMap((m) =>
      m.role === "assistant" ? m.toolCalls.map((c) => c.result) : [],
    );
    expect(results).toHaveLength(4);
    expect(results.every((r) => typeof r === "string" && r.length === 700 * 1024)).toBe(true);
    expect(cache.get("large")).toBeUndefined();
    expect(cache.get("small")).toBeDefined();
    expect(cache.dataBytes).toBe(smallLog.dataBytes);

    // a later read of the kept session folds only what was appended, and counts it
    expect((await fx.store.append("small", toolTurn("s2", 20))).status).toBe("appended");
    await readSessionTranscript(fx.host, ADMIN, "small", { cache });
    const grown = await readWholeLog(fx.store, "small");
    if (grown.status !== "ok") throw new Error(grown.status);
    expect(cache.dataBytes).toBe(grown.dataBytes);
    expect(cache.dataBytes).toBeGreaterThan(smallLog.dataBytes + 20 * 1024);
  });
});
