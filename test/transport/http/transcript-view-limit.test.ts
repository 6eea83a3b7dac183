import { afterEach, describe, expect, it, vi } from "vitest";
import { SessionmuxError } from "../../../protocol/index.js";
import { ADMIN } from "../../../src/host/principal.js";
import { readSessionTranscript, TranscriptCache } from "../../../src/transport/http/session-transcript.js";
import { demoAgentWith, type HostFixture, openHost, turnEvents } from "../../host/host-fixture.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { readWholeLog } from "../../support/whole-log.js";
import { api } from "./http-client.js";
import { MIB, toolTurn } from "./tool-turns.js";

async function headOf(store: Parameters<typeof readWholeLog>[0], sessionId: string): Promise<number> {
  const log = await readWholeLog(store, sessionId);
  if (log.status !== "ok") throw new Error(log.status);
  return log.headSeq;
}

async function refusal(read: Promise<unknown>): Promise<SessionmuxError> {
  const error = await read.then(
    () => undefined,
    (err: unknown) => err,
  );
  if (!(error instanceof SessionmuxError)) throw new Error(`expected a refusal, got ${String(error)}`);
  return error;
}

describe("the transcript a view folds is bounded (docs/reliability.md, Limits)", () => {
  let fx: HostFixture | undefined;
  afterEach(async () => {
    await fx?.dispose();
    fx = undefined;
  });

  it("stops reading once the data passes the bound and refuses transcript_too_large", async () => {
    fx = await openHost();
    await fx.store.create({ sessionId: "big", owner: "admin", model: "demo-fast" });
    // 8 results of 700 KiB: 5.5 MiB of data, read 1 MiB at a time
    for (let i = 0; i < 8; i++)
      expect((await fx.store.append("big", toolTurn(`b${i}`, 700))).status).toBe("appended");
    const reads = vi.spyOn(fx.store, "readAfter");
    const error = await refusal(readSessionTranscript(fx.host, ADMIN, "big", { maxDataBytes: 2 * MIB }));
    expect(error.code).toBe("transcript_too_large");
    expect(error.data).toEqual({ sessionId: "big", maxDataBytes: 2 * MIB });
    // the read that passed 2 MiB was the last: each read holds about 1.4 MiB here, the log takes 4
    expect(reads).toHaveBeenCalledTimes(2);

    // the same log under a bound it fits is folded whole
    reads.mockClear();
    const whole = await readSessionTranscript(fx.host, ADMIN, "big", { maxDataBytes: 8 * MIB });
    expect(whole.transcript.lastSeq).toBe(await headOf(fx.store, "big"));
    expect(reads.mock.calls.length).toBeGreaterThanOrEqual(4);
  });

  it("counts what a cached transcript already holds: the session that outgrew the bound is dropped from the cache", async () => {
    fx = await openHost();
    await fx.store.create({ sessionId: "grows", owner: "admin", model: "demo-fast" });
    const cache = new TranscriptCache(16, 32 * MIB);
    for (const turn of ["g0", "g1"])
      expect((await fx.store.append("grows", toolTurn(turn, 600))).status).toBe("appended");
    await readSessionTranscript(fx.host, ADMIN, "grows", { cache, maxDataBytes: 2 * MIB });
    expect(cache.get("grows")).toBeDefined();

    // 1.2 MiB kept, 1 MiB more appended: only the new 1 MiB is read, and together they pass 2 MiB
    for (const turn of ["g2", "g3"])
      expect((await fx.store.append("grows", toolTurn(turn, 500))).status).toBe("appended");
    const reads = vi.spyOn(fx.store, "readAfter");
    const error = await refusal(
      readSessionTranscript(fx.host, ADMIN, "grows", { cache, maxDataBytes: 2 * MIB }),
    );
    expect(error.code).toBe("transcript_too_large");
    expect(reads).toHaveBeenCalledTimes(1);
    expect(reads.mock.calls[0]![1]).toBeGreaterThan(0); // it read on from the cached transcript
    expect(cache.get("grows")).toBeUndefined();
    expect(cache.dataBytes).toBe(0);
  });

  it("lets the event loop run between reads, so one long fold does not hold other requests", async () => {
    fx = await openHost();
    await fx.store.create({ sessionId: "long", owner: "admin", model: "demo-fast" });
    for (let i = 0; i < 12; i++)
      expect((await fx.store.append("long", toolTurn(`l${i}`, 600))).status).toBe("appended");
    const reads = vi.spyOn(fx.store, "readAfter");
    // SQLite answers a read at once: without a yield the whole fold runs before any immediate
    let turns = 0;
    let folding = true;
    const count = () => {
      turns++;
      if (folding) setImmediate(count);
    };
    setImmediate(count);
    await readSessionTranscript(fx.host, ADMIN, "long");
    folding = false;
    expect(reads.mock.calls.length).toBeGreaterThanOrEqual(5);
    expect(turns).toBeGreaterThanOrEqual(reads.mock.calls.length - 1);
  });
});

describe("GET /v1/sessions/{id} and the turns route past the bound", () => {
  let host: TestHost | undefined;
  afterEach(async () => {
    await host?.dispose();
    host = undefined;
  });

  it("answer 409 transcript_too_large for a session over it, and go on answering the others", async () => {
    // an agent that reads the whole log: the mounted host bounds it with the same option
    const agent = demoAgentWith("reader", async (turn) => {
      const history = await turn.history();
      await turn.emit({ type: "assistant/delta", text: `${history.length} events` });
      return { state: "completed" };
    });
    host = await startTestHost({ http: { maxTranscriptBytes: 2 * MIB }, agent });
    for (const id of ["big", "small"])
      await host.store.create({ sessionId: id, owner: "admin", model: "demo-fast" });
    for (let i = 0; i < 4; i++)
      expect((await host.store.append("big", toolTurn(`b${i}`, 700))).status).toBe("appended");
    expect((await host.store.append("small", toolTurn("s0", 10))).status).toBe("appended");

    for (const path of ["/v1/sessions/big", "/api/chat/sessions/big/turns"]) {
      const reply = await api(host, path, { token: ADMIN_TOKEN });
      expect(reply.status).toBe(409);
      expect(reply.json).toEqual({ error: "transcript_too_large", max_data_bytes: 2 * MIB });
    }
    const small = await api(host, "/v1/sessions/small", { token: ADMIN_TOKEN });
    expect(small.status).toBe(200);
    expect((small.json as { seq: number }).seq).toBe(await headOf(host.store, "small"));
    expect((await api(host, "/healthz")).status).toBe(200);

    const read = async (sessionId: string) => {
      const started = await host!.host.call(ADMIN, "session.prompt", {
        sessionId,
        text: "read",
        clientMessageId: `read-${sessionId}`,
      });
      return (await turnEvents(host!.store, sessionId, started.turnId!)).at(-1);
    };
    expect(await read("big")).toMatchObject({
      type: "turn/end",
      data: { state: "failed", error: expect.stringContaining(`more than ${2 * MIB} bytes of event data`) },
    });
    expect(await read("small")).toMatchObject({ type: "turn/end", data: { state: "completed" } });
  });
});
