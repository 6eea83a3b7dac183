import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import type { FollowUpdate } from "../../src/client/follow-cursor.js";
import { followSession } from "../../src/client/follow-session.js";
import { createNodeClient, type SessionmuxClient } from "../../src/client/node.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";

/**
 * Model-based test of `followSession` against the real host: random commits, socket cuts, clears
 * and pauses, with a model log per epoch. Invariants: every applied event is the model's event at
 * that seq of that epoch (no phantom), the follower's mirror is always contiguous from 1, and once
 * the actions stop it equals the model's current log in the current epoch.
 */

type Action = { kind: "commit"; n: number } | { kind: "cut" } | { kind: "clear" } | { kind: "settle" };

const action: fc.Arbitrary<Action> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({ kind: fc.constant("commit" as const), n: fc.integer({ min: 1, max: 20 }) }),
  },
  { weight: 3, arbitrary: fc.constant({ kind: "cut" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "clear" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "settle" as const }) },
);

let host: TestHost;
let proxy: TcpProxy;
let admin: SessionmuxClient;
let runId = 0;

beforeAll(async () => {
  host = await startTestHost();
  proxy = await startTcpProxy(host.port);
  admin = createNodeClient({ url: host.wsUrl, token: ADMIN_TOKEN });
});
afterAll(async () => {
  await admin?.close();
  await proxy?.stop();
  await host?.dispose();
});

class Model {
  readonly epochs = new Map<string, SessionEvent[]>();
  epoch = "";
  get log(): SessionEvent[] {
    return this.epochs.get(this.epoch) ?? [];
  }
  begin(epoch: string, events: SessionEvent[]): void {
    this.epoch = epoch;
    this.epochs.set(epoch, [...events]);
  }
}

async function commit(model: Model, sessionId: string, n: number): Promise<void> {
  const events = Array.from({ length: n }, (_, i) => ({
    type: "session/renamed" as const,
    data: { title: `r${model.log.length + i + 1}` },
  }));
  const outcome = await host.store.append(sessionId, events);
  if (outcome.status !== "appended") throw new Error(`append failed: ${outcome.status}`);
  expect(outcome.epoch).toBe(model.epoch);
  model.log.push(...outcome.events);
}

describe("followSession against a model log", () => {
  it("stays exactly equal to the log through random commits, cuts and clears", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 10 }),
        fc.integer({ min: 0, max: 100 }),
        fc.array(action, { minLength: 1, maxLength: 25 }),
        async (prefix, startPercent, actions) => {
          const sessionId = `model-${++runId}`;
          const created = await admin.create({ sessionId });
          const model = new Model();
          model.begin(created.header.epoch, (await admin.page({ sessionId })).events as SessionEvent[]);
          await commit(model, sessionId, prefix);
          const afterSeq = Math.floor((model.log.length * startPercent) / 100);

          const client = createNodeClient({
            url: `ws://127.0.0.1:${proxy.port}/api/remote.mux`,
            token: ADMIN_TOKEN,
            backoff: { baseMs: 5, capMs: 50 },
          });
          let mirror = model.log.slice(0, afterSeq);
          let mirrorEpoch = model.epoch;
          const violations: string[] = [];
          const apply = (u: FollowUpdate) => {
            if (u.kind === "reset") {
              mirror = [];
              mirrorEpoch = u.epoch;
            } else if (u.kind === "opened") {
              mirrorEpoch = u.epoch;
            } else if (u.kind === "events") {
              for (const e of u.events) {
                const expected = model.epochs.get(mirrorEpoch)?.[e.seq - 1];
                if (e.seq !== mirror.length + 1) violations.push(`gap or duplicate at ${e.seq}`);
                if (
                  !expected ||
                  expected.seq !== e.seq ||
                  JSON.stringify(expected.data) !== JSON.stringify(e.data)
                ) {
                  violations.push(`phantom ${e.seq} in ${mirrorEpoch}`);
                }
                mirror.push(e);
              }
            }
          };
          const errors: unknown[] = [];
          const sub = followSession(client, sessionId, { afterSeq, epoch: model.epoch }).subscribe({
            next: apply,
            error: (e: unknown) => errors.push(e),
          });
          const settled = () =>
            vi.waitFor(
              () => {
                expect(errors).toEqual([]);
                expect(mirrorEpoch).toBe(model.epoch);
                expect(mirror.map((e) => e.seq)).toEqual(model.log.map((e) => e.seq));
              },
              { timeout: 20_000, interval: 10 },
            );
          try {
            for (const a of actions) {
              if (a.kind === "commit") await commit(model, sessionId, a.n);
              else if (a.kind === "cut") proxy.cutAll();
              else if (a.kind === "clear") {
                const { epoch } = await admin.call("session.clear", { sessionId });
                model.begin(epoch, []);
              } else await settled();
            }
            await settled();
            expect(violations).toEqual([]);
            expect(mirror.map((e) => e.data)).toEqual(model.log.map((e) => e.data));
          } finally {
            sub.unsubscribe();
            await client.close();
          }
        },
      ),
      { numRuns: 60, endOnFailure: true },
    );
  }, 180_000);
});
