import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SessionStore } from "../../../src/store/session-store.js";
import { asyncStore } from "../../support/async-store.js";
import { startTestHost, type TestHost } from "../../support/host.js";
import { appendDeltas, connect, createSession, expectRange, headSeq } from "./mux-fixture.js";

const STREAMS = 64;

/**
 * One socket's follow streams read their logs a few at a time (at most eight reads, each with its
 * sending, in flight): a peer opening every stream it may on a long log at once made the host read
 * and hold a page per stream all together, 1.5 s of one event-loop turn and 350 MB for 256 streams
 * replaying a 27 MB log.
 */
describe("log reads of one socket's follow streams", () => {
  let host: TestHost;
  let inFlight = 0;
  let most = 0;
  beforeAll(async () => {
    host = await startTestHost({
      mux: { replayBatch: 5 },
      storeView: (store) => {
        const slow = asyncStore(store, { maxDelayMs: 4 }).store;
        const read = slow.readAfterEncoded.bind(slow);
        return new Proxy(slow, {
          get(target, property, receiver) {
            if (property !== "readAfterEncoded") return Reflect.get(target, property, receiver);
            return async (...args: Parameters<SessionStore["readAfterEncoded"]>) => {
              most = Math.max(most, ++inFlight);
              try {
                return await read(...args);
              } finally {
                inFlight--;
              }
            };
          },
        });
      },
    });
  });
  afterAll(async () => {
    await host?.dispose();
  });

  it(`are at most eight at once for ${STREAMS} streams opened together, and each still gets its whole log`, async () => {
    const peer = await connect(host);
    const sessionId = await createSession(peer);
    await appendDeltas(host, sessionId, 400, 100);
    const end = await headSeq(host, sessionId);
    most = 0;
    const ids = Array.from({ length: STREAMS }, () => peer.follow(sessionId, { afterSeq: 0 }));
    for (const id of ids) await peer.waitSeq(id, end, 30_000);
    for (const id of ids) expectRange(peer.events(id), 1, end);
    expect(most).toBeGreaterThan(1);
    expect(most).toBeLessThanOrEqual(8);
    expect(peer.violations).toEqual([]);
    await peer.disconnect();
  });
});
