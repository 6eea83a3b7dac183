import { afterEach, describe, expect, it, vi } from "vitest";
import type { NetworkSignal } from "../../src/client/network-signals.js";
import { ADMIN_TOKEN, startTestHost } from "../support/host.js";
import { startTcpProxy } from "../support/tcp-proxy.js";

// The Node client's default source, replaced by one the test speaks through: the real one needs a
// machine that sleeps. What the real source hears is tested on its own below.
const said = vi.hoisted(() => ({ listeners: new Set<(signal: NetworkSignal) => void>(), made: 0 }));
vi.mock("../../src/client/network-signals.js", async (original) => {
  const real = await original<typeof import("../../src/client/network-signals.js")>();
  return {
    ...real,
    real,
    clockJumpSignals: () => {
      said.made += 1;
      return (listener: (signal: NetworkSignal) => void) => {
        said.listeners.add(listener);
        return () => said.listeners.delete(listener);
      };
    },
  };
});

const { createNodeClient } = await import("../../src/client/node.js");
const { real } = (await import("../../src/client/network-signals.js")) as unknown as {
  real: typeof import("../../src/client/network-signals.js");
};

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  vi.useRealTimers();
  while (cleanups.length > 0) await cleanups.pop()!();
});

describe("clockJumpSignals", () => {
  it("says `resumed` once for a tick that came more than `jumpMs` late, and nothing for ticks on time", () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "Date"] });
    const heard: NetworkSignal[] = [];
    const stop = real.clockJumpSignals({ tickMs: 2_000, jumpMs: 10_000 })((signal) => heard.push(signal));
    vi.advanceTimersByTime(600_000);
    expect(heard).toEqual([]);
    // the clock moves on while no timer runs, as through a sleep: late by exactly `jumpMs` is not a jump
    vi.setSystemTime(Date.now() + 10_000);
    vi.advanceTimersByTime(2_000);
    expect(heard).toEqual([]);
    vi.setSystemTime(Date.now() + 10_001);
    vi.advanceTimersByTime(2_000);
    expect(heard).toEqual(["resumed"]);
    vi.advanceTimersByTime(60_000);
    expect(heard).toEqual(["resumed"]);
    stop();
    vi.setSystemTime(Date.now() + 600_000);
    vi.advanceTimersByTime(60_000);
    expect(heard).toEqual(["resumed"]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("defaults to a tick of 2 s and a jump of 10 s", () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "Date"] });
    const heard: NetworkSignal[] = [];
    const stop = real.clockJumpSignals()((signal) => heard.push(signal));
    vi.setSystemTime(Date.now() + 10_000);
    vi.advanceTimersByTime(2_000);
    expect(heard).toEqual([]);
    vi.setSystemTime(Date.now() + 10_001);
    vi.advanceTimersByTime(1_999);
    expect(heard).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(heard).toEqual(["resumed"]);
    stop();
  });

  it("hears an event loop held past the jump on real timers, and never keeps the process alive", async () => {
    const heard: NetworkSignal[] = [];
    const spy = vi.spyOn(globalThis, "setInterval");
    const stop = real.clockJumpSignals({ tickMs: 20, jumpMs: 100 })((signal) => heard.push(signal));
    cleanups.push(stop);
    const timer = spy.mock.results[0]!.value as NodeJS.Timeout;
    spy.mockRestore();
    expect(timer.hasRef()).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(heard).toEqual([]);
    const until = Date.now() + 300;
    while (Date.now() < until) {
      // held, as a stopped process or a sleeping machine is
    }
    await vi.waitFor(() => expect(heard).toEqual(["resumed"]), { timeout: 2_000 });
  });
});

describe("a Node client hears the machine's sleep by default", () => {
  it("probes on `resumed`, so a path that died meanwhile is dropped within the probe's wait", async () => {
    const host = await startTestHost();
    cleanups.push(() => host.dispose());
    const proxy = await startTcpProxy(host.port);
    cleanups.push(() => proxy.stop());
    const made = said.made;
    const client = createNodeClient({
      url: `ws://127.0.0.1:${proxy.port}/api/remote.mux`,
      token: ADMIN_TOKEN,
      // the quiet wait alone would notice the dead path only after ten minutes
      keepAlive: { intervalMs: 600_000, pongTimeoutMs: 500 },
      backoff: { baseMs: 20, capMs: 100 },
    });
    cleanups.push(() => client.close());
    expect(said.made).toBe(made + 1);
    await client.call("session.models", {});
    expect(proxy.silenceAll()).toBe(1);
    for (const listener of said.listeners) listener("resumed");
    await vi.waitFor(() => expect(proxy.accepted).toBeGreaterThanOrEqual(2), { timeout: 5_000 });
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    await client.call("session.models", {});
    await client.close();
    expect(said.listeners.size).toBe(0);
  });

  it("uses no clock source when given its own hints or `network: false`", () => {
    const made = said.made;
    const own = createNodeClient({ url: "ws://127.0.0.1:9/", token: "t", network: () => () => undefined });
    const none = createNodeClient({ url: "ws://127.0.0.1:9/", token: "t", network: false });
    cleanups.push(
      () => own.close(),
      () => none.close(),
    );
    expect(said.made).toBe(made);
    expect(said.listeners.size).toBe(0);
  });
});
