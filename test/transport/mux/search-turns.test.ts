import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ReadAsker } from "../../../src/store/fair-turns.js";
import type { HostStore } from "../../../src/store/live-state-store.js";
import { SEARCH_PREFIX_MAX_WORDS } from "../../../src/store/search-prefix-words.js";
import { userMessage } from "../../store/open-store.js";
import { ALICE_TOKEN, BOB_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { until } from "../../support/until.js";
import { connect } from "./mux-fixture.js";

/**
 * Messages enough that a search with a broad last prefix reads for a while on the read thread:
 * each holds a word starting `rar`, as many words as a last prefix may expand to (more match it
 * whole), every one of them read by `okapi rar`.
 */
async function broadIndex(host: TestHost, messages: number): Promise<void> {
  const sessions = 10;
  for (let s = 0; s < sessions; s++) {
    await host.store.create({ sessionId: `a${s}`, owner: "alice", model: "m" });
    for (let done = 0; done < messages / sessions; done += 1000) {
      await host.store.append(
        `a${s}`,
        Array.from({ length: 1000 }, (_, k) => {
          const i = s * messages + done + k;
          const word = (s * messages) / sessions + done + k;
          return userMessage(
            `alpha bravo tok${i % 5233} rar${word % SEARCH_PREFIX_MAX_WORDS}${i % 1000 === 0 ? " okapi" : ""}`,
            `m${i}`,
          );
        }),
      );
    }
  }
  await host.store.create({ sessionId: "b0", owner: "bob", model: "m" });
  await host.store.append("b0", [userMessage("a narwhal sighted", "b1")]);
}

/** Answers (`result` or `error`) in the order they reached any of the peers, as `label:id`. */
function answerOrder(peers: Record<string, MuxPeer>): string[] {
  const order: string[] = [];
  for (const [label, peer] of Object.entries(peers))
    peer.ws.on("message", () => {
      // the peer's own listener, added first, has just kept the frame
      const frame = peer.frames[peer.frames.length - 1];
      if (frame && (frame.type === "result" || frame.type === "error")) order.push(`${label}:${frame.id}`);
    });
  return order;
}

const BROAD = { query: "okapi rar" };
/** The searches one principal may run at once on the host of these tests. */
const SEARCHES = 16;

describe("session.search over the mux: one principal's searches in flight", () => {
  let host: TestHost;
  beforeAll(async () => {
    // sixteen at once: room enough that the turns show however the statements interleave
    host = await startTestHost({ principals: { maxSearchesPerPrincipal: SEARCHES } });
    await broadIndex(host, 50_000);
  }, 120_000);
  afterAll(async () => {
    await host?.dispose();
  });

  /**
   * Alice's sixteen searches, four on each of her sockets (as many as a socket runs at once);
   * resolves once one is answered, the other fifteen under way.
   */
  async function allInFlight(sockets: Record<string, MuxPeer>, order: string[]): Promise<string[]> {
    const ids = Object.entries(sockets).flatMap(([label, peer]) =>
      [0, 1, 2, 3].map(() => {
        const id = peer.nextId();
        peer.send({ type: "call", id, method: "session.search", params: BROAD });
        return `${label}:${id}`;
      }),
    );
    await until(() => order.length > 0, 60_000, "alice's first answer");
    return ids;
  }

  const aliceSockets = async () => {
    const peers = await Promise.all([0, 1, 2, 3].map(() => connect(host, { token: ALICE_TOKEN })));
    return Object.fromEntries(peers.map((peer, i) => [`a${i}`, peer]));
  };

  it("answers another principal's search in its turn while one keeps the most it may in flight", async () => {
    const alice = await aliceSockets();
    const bob = await connect(host, { token: BOB_TOKEN });
    try {
      const order = answerOrder({ ...alice, bob });
      const ids = await allInFlight(alice, order);
      // alice keeps sixteen in flight
      const again = alice.a0!.call("session.search", BROAD, 60_000);
      const bobId = bob.nextId();
      bob.send({ type: "call", id: bobId, method: "session.search", params: { query: "narwhal" } });
      await until(() => order.includes(`bob:${bobId}`), 60_000, "bob's answer");
      const bobAt = order.indexOf(`bob:${bobId}`);
      expect(bob.of(bobId).find((f) => f.type === "result")?.value).toEqual({
        hits: [{ sessionId: "b0", seq: 2, snippet: "a **narwhal** sighted" }],
      });
      // each of bob's three statements waited for about one of alice's: in arrival order it came
      // after every one of hers under way, and after the one she sent before it
      const aliceBefore = ids.filter((id) => {
        const at = order.indexOf(id);
        return at >= 0 && at < bobAt;
      });
      expect(aliceBefore.length).toBeLessThan(ids.length / 2);
      await until(() => ids.every((id) => order.includes(id)), 60_000, "alice's answers");
      expect(await again).toMatchObject({ hits: expect.any(Array) });
    } finally {
      for (const peer of [...Object.values(alice), bob]) await peer.disconnect();
    }
  }, 120_000);

  it("refuses a principal's search past the most it may run at once overloaded, typed, and serves it again once one is answered", async () => {
    const alice = await aliceSockets();
    const extra = await connect(host, { token: ALICE_TOKEN });
    try {
      const order = answerOrder(alice);
      const ids = await allInFlight(alice, order);
      const again = alice.a0!.call("session.search", BROAD, 60_000);
      // one more at once, from a socket of its own: refused before it reaches the store
      expect(await extra.callError("session.search", BROAD)).toMatchObject({
        code: "overloaded",
        retryable: true,
        data: { limit: "searches_per_principal", max: SEARCHES },
      });
      await until(() => ids.every((id) => order.includes(id)), 60_000, "alice's answers");
      await again;
      expect(await extra.call("session.search", { query: "okapi rar0" }, 60_000)).toMatchObject({
        hits: expect.arrayContaining([expect.objectContaining({ sessionId: "a0", seq: 2 })]),
      });
    } finally {
      for (const peer of [...Object.values(alice), extra]) await peer.disconnect();
    }
  }, 120_000);
});

describe("session.search over the mux: a caller that left", () => {
  it("hands the store a signal that fires when the caller's socket closes", async () => {
    const askers: ReadAsker[] = [];
    const host = await startTestHost({
      storeView: (store: HostStore) =>
        new Proxy(store, {
          get(target, property) {
            if (property === "search")
              return (_query: string, _limit: number, _owner?: string, asker?: ReadAsker) => {
                if (asker) askers.push(asker);
                // never answers: the caller leaves first
                return new Promise(() => {});
              };
            const value: unknown = Reflect.get(target, property, target);
            return typeof value === "function" ? value.bind(target) : value;
          },
        }),
    });
    try {
      const alice = await connect(host, { token: ALICE_TOKEN });
      alice.send({ type: "call", id: alice.nextId(), method: "session.search", params: BROAD });
      const asker = await until(() => askers[0], 10_000, "the search to reach the store");
      expect(asker.name).toBe("alice");
      expect(asker.signal?.aborted).toBe(false);
      await alice.disconnect();
      await until(() => asker.signal?.aborted, 10_000, "the signal to fire");
    } finally {
      await host.dispose();
    }
  });
});
