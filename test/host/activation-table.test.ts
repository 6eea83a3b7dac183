import { afterEach, describe, expect, test, vi } from "vitest";
import {
  type Activation,
  ActivationTable,
  type CallMethod,
  METHOD_NAMES,
  type MethodName,
  Methods,
  type ParamsOf,
} from "../../protocol/index.js";
import { ADMIN } from "../../src/host/principal.js";
import type { SessionHost } from "../../src/host/session-host.js";
import { errorCode, type HostFixture, openHost, turnEvents } from "./host-fixture.js";

/**
 * §4: every method is exercised on a cold session (one with no live agent, also after a host
 * restart on the same database) and the live-agent set is compared before and after.
 */

const COLD = "cold-session";

/**
 * The rules as protocol-v1 states them (§4's table, §5's stream headings, §9 for `explicit`),
 * written by hand: the cases below pick their methods from here, not from the table under test.
 */
const contract: Record<MethodName, Activation> = {
  "session.list": "cold",
  "session.page": "cold",
  "session.search": "cold",
  "session.models": "cold",
  "session.attachment": "cold",
  "session.create": "resume",
  "session.fork": "resume",
  "session.prompt": "resume",
  "session.rename": "cold",
  "session.selectModel": "resume",
  "session.cancel": "live-only",
  "session.updateQueue": "live-only",
  "session.respond": "resume",
  "session.ack": "cold",
  "session.clear": "cold",
  "session.dismiss": "cold",
  "session.restore": "cold",
  "session.delete": "explicit",
  "session.follow": "cold",
  "session.control": "cold",
  "session.download": "cold",
};

/** Valid params for every call method against the cold session `COLD`. */
const sampleParams: { [M in CallMethod]: ParamsOf<M> } = {
  "session.list": { limit: 10 },
  "session.page": { sessionId: COLD },
  "session.search": { query: "hello" },
  "session.models": {},
  "session.attachment": { sessionId: COLD, attachmentId: "no-such-attachment" },
  "session.create": { sessionId: "created-here" },
  "session.fork": { sourceId: COLD, sessionId: "forked-here" },
  "session.prompt": { sessionId: COLD, text: "hello", clientMessageId: "activation-1" },
  "session.rename": { sessionId: COLD, title: "renamed" },
  "session.selectModel": { sessionId: COLD, model: "demo-careful" },
  "session.cancel": { sessionId: COLD },
  "session.updateQueue": { sessionId: COLD, op: { clear: true } },
  "session.respond": { interactionId: "no-such-interaction", response: { outcome: "approve" } },
  "session.ack": { sessionId: COLD, completionSettledAt: 0 },
  "session.clear": { sessionId: COLD },
  "session.dismiss": { sessionId: COLD },
  "session.restore": { sessionId: COLD },
  "session.delete": { sessionId: COLD },
};

/** Expected outcome of a cold or explicit call that legitimately refuses (an unknown attachment). */
const coldRefusals: Partial<Record<CallMethod, string>> = { "session.attachment": "attachment_not_found" };

let fx: HostFixture;
afterEach(async () => fx?.dispose());

/** A session with history whose host was restarted: nothing of it is live. */
async function coldSessionAfterRestart(): Promise<HostFixture> {
  const fixture = await openHost();
  await fixture.host.call(ADMIN, "session.create", { sessionId: COLD });
  const r = await fixture.host.call(ADMIN, "session.prompt", {
    sessionId: COLD,
    text: "hello",
    clientMessageId: "seed",
  });
  await turnEvents(fixture.store, COLD, r.turnId!);
  await fixture.restart();
  expect(fixture.host.live.agents()).toEqual([]);
  return fixture;
}

/** A session whose host was restarted while its turn waited on an approval: parked, not live. */
async function parkedSessionAfterRestart(): Promise<{ fixture: HostFixture; interactionId: string }> {
  const fixture = await openHost();
  await fixture.host.call(ADMIN, "session.create", { sessionId: COLD });
  await fixture.host.call(ADMIN, "session.prompt", {
    sessionId: COLD,
    text: "/approve go",
    clientMessageId: "p",
  });
  await vi.waitFor(() => expect(fixture.host.live.interactions()).toHaveLength(1), { timeout: 10_000 });
  const interactionId = fixture.host.live.interactions()[0]!.interactionId;
  await fixture.restart();
  expect(fixture.host.live.agents()).toEqual([]);
  return { fixture, interactionId };
}

function liveSet(host: SessionHost): string[] {
  return host.live
    .agents()
    .map((a) => a.sessionId)
    .sort();
}

async function callAny(host: SessionHost, method: CallMethod, params: unknown): Promise<unknown> {
  return host.call(ADMIN, method, params as never);
}

describe("the activation table", () => {
  test("is the contract's, with sample params for every call method", () => {
    expect(ActivationTable).toEqual(contract);
    for (const method of METHOD_NAMES) {
      if (Methods[method].kind === "call") expect(sampleParams).toHaveProperty(method);
    }
  });

  const byActivation = (activation: Activation) =>
    METHOD_NAMES.filter((m): m is CallMethod => Methods[m].kind === "call" && contract[m] === activation);

  test.each(byActivation("cold").concat(byActivation("explicit")))(
    "%s leaves the live-agent set unchanged on a cold session after a restart",
    async (method) => {
      fx = await coldSessionAfterRestart();
      const before = liveSet(fx.host);
      const outcome = await errorCode(() => callAny(fx.host, method, sampleParams[method]));
      expect(outcome.code).toBe(coldRefusals[method] ?? "succeeded");
      expect(liveSet(fx.host)).toEqual(before);
      expect((await fx.metrics.agentsLiveGauge.get()).values[0]?.value ?? 0).toBe(0);
    },
  );

  test.each(byActivation("live-only"))(
    "%s on a cold session fails without starting an agent",
    async (method) => {
      fx = await coldSessionAfterRestart();
      const outcome = await errorCode(() => callAny(fx.host, method, sampleParams[method]));
      expect(outcome.code).toBe("agent_not_live");
      expect(liveSet(fx.host)).toEqual([]);
    },
  );

  test.each(byActivation("resume"))(
    "%s may start the agent of the session it asks work of",
    async (method) => {
      if (method === "session.respond") {
        // answering a turn parked by the previous process resumes its agent to finish the turn
        const parked = await parkedSessionAfterRestart();
        fx = parked.fixture;
        await callAny(fx.host, method, {
          interactionId: parked.interactionId,
          response: { outcome: "approve" },
        });
      } else {
        fx = await coldSessionAfterRestart();
        await callAny(fx.host, method, sampleParams[method]);
      }
      const target =
        method === "session.create" ? "created-here" : method === "session.fork" ? "forked-here" : COLD;
      expect(liveSet(fx.host)).toEqual([target]);
    },
  );

  test("stream methods are cold: authorizing a follow and building a control baseline start nothing", async () => {
    fx = await coldSessionAfterRestart();
    const streams: MethodName[] = METHOD_NAMES.filter((m) => Methods[m].kind === "stream");
    expect(streams).toEqual(["session.follow", "session.control", "session.download"]);
    expect(streams.map((m) => contract[m])).toEqual(streams.map(() => "cold"));
    await fx.host.authorizeRead(ADMIN, COLD);
    const off = fx.host.subscribeControl(ADMIN, () => undefined);
    const baseline = await fx.host.controlBaseline(ADMIN);
    off();
    expect(baseline.agents).toEqual([]);
    expect(liveSet(fx.host)).toEqual([]);
  });

  test("cold methods on a session that never had an agent in this process start none either", async () => {
    fx = await openHost();
    // created through the store directly: this host never saw it
    await fx.store.create({ sessionId: COLD, owner: "admin", model: "demo-fast" });
    for (const method of byActivation("cold")) {
      await errorCode(() => callAny(fx.host, method, sampleParams[method]));
      expect(liveSet(fx.host)).toEqual([]);
    }
  });
});
