import { afterEach, describe, expect, it, vi } from "vitest";
import { SessionmuxError } from "../../../protocol/index.js";
import { ADMIN } from "../../../src/host/principal.js";
import type { HostStore } from "../../../src/store/live-state-store.js";
import { BodiesReceiving } from "../../../src/transport/http/bodies-receiving.js";
import { readSessionTranscript } from "../../../src/transport/http/session-transcript.js";
import { type HostFixture, openHost } from "../../host/host-fixture.js";
import { ALICE_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { withMembers } from "../../support/with-members.js";
import { ALICE, api } from "./http-client.js";
import { MIB, toolTurn } from "./tool-turns.js";

async function refusal(read: Promise<unknown>): Promise<SessionmuxError> {
  const error = await read.then(
    () => undefined,
    (err: unknown) => err,
  );
  if (!(error instanceof SessionmuxError)) throw new Error(`expected a refusal, got ${String(error)}`);
  return error;
}

describe("the event data one principal's views fold at once is bounded (docs/reliability.md, Limits)", () => {
  let fx: HostFixture | undefined;
  let h: TestHost | undefined;
  afterEach(async () => {
    vi.restoreAllMocks();
    await fx?.dispose();
    await h?.dispose();
    fx = undefined;
    h = undefined;
  });

  it("refuses overloaded the fold that would take its principal past the view bound, never one alone", async () => {
    fx = await openHost();
    const { store, host } = fx;
    // each session: 4 results of 700 KiB, about 2.8 MiB, read in two reads of about 1.4 MiB
    for (const [sessionId, owner] of [
      ["a", "admin"],
      ["b", "admin"],
      ["c", "alice"],
    ] as const) {
      await store.create({ sessionId, owner, model: "demo-fast" });
      for (let i = 0; i < 4; i++)
        expect((await store.append(sessionId, toolTurn(`${sessionId}${i}`, 700))).status).toBe("appended");
    }
    const folding = new BodiesReceiving();
    const reading = { maxDataBytes: 4 * MIB, folding };

    // the fold of "a" stops before its second read, holding its first
    let reached!: () => void;
    const atGate = new Promise<void>((resolve) => {
      reached = resolve;
    });
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const readAfter = store.readAfter.bind(store);
    vi.spyOn(store, "readAfter").mockImplementation(async (sessionId, afterSeq, limit) => {
      if (sessionId === "a" && afterSeq > 0) {
        reached();
        await gate;
      }
      return readAfter(sessionId, afterSeq, limit);
    });
    const first = readSessionTranscript(host, ADMIN, "a", reading);
    await atGate;
    const held = folding.held("admin");
    expect(held).toBeGreaterThan(MIB);
    expect(held).toBeLessThan(2 * MIB);

    // a second fold of the same principal passes 4 MiB at its second read
    const error = await refusal(readSessionTranscript(host, ADMIN, "b", reading));
    expect(error.code).toBe("overloaded");
    expect(error.retryable).toBe(true);
    expect(error.data).toEqual({ limit: "transcript_fold_bytes_per_principal", max: 4 * MIB });
    expect(folding.held("admin")).toBe(held);

    // another principal's fold is not counted against it
    const other = await readSessionTranscript(host, ALICE, "c", reading);
    expect(other.transcript.turns).toHaveLength(4);
    expect(folding.held("alice")).toBe(0);

    // the first fold, alone, goes on to its end; then the refused one folds too
    open();
    expect((await first).transcript.turns).toHaveLength(4);
    expect(folding.held("admin")).toBe(0);
    expect((await readSessionTranscript(host, ADMIN, "b", reading)).transcript.turns).toHaveLength(4);
    expect(folding.held("admin")).toBe(0);
  });

  it("answers a view past it 503 overloaded over HTTP", async () => {
    let reached!: () => void;
    const atGate = new Promise<void>((resolve) => {
      reached = resolve;
    });
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    h = await startTestHost({
      http: { maxTranscriptBytes: 4 * MIB },
      storeView: (store: HostStore) =>
        withMembers(store, {
          readAfter: async (sessionId: string, afterSeq: number, limit: number) => {
            if (sessionId === "a" && afterSeq > 0) {
              reached();
              await gate;
            }
            return store.readAfter(sessionId, afterSeq, limit);
          },
        }),
    });
    for (const sessionId of ["a", "b"]) {
      await h.store.create({ sessionId, owner: "alice", model: "demo-fast" });
      for (let i = 0; i < 4; i++)
        expect((await h.store.append(sessionId, toolTurn(`${sessionId}${i}`, 700))).status).toBe("appended");
    }
    const first = api(h, "/v1/sessions/a", { token: ALICE_TOKEN });
    await atGate;
    const refused = await api(h, "/api/chat/sessions/b/turns", { token: ALICE_TOKEN });
    expect(refused.status).toBe(503);
    expect(refused.json).toMatchObject({ error: "overloaded" });
    open();
    expect((await first).status).toBe(200);
    expect((await api(h, "/api/chat/sessions/b/turns", { token: ALICE_TOKEN })).status).toBe(200);
  });
});
