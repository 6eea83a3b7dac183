import { encodeFrame } from "../../protocol/codec.js";
import type { Clients } from "./clients-process.js";
import {
  cpuMs,
  deltas,
  FOLLOWERS,
  fmt,
  followedHost,
  freshDb,
  goal,
  newSession,
  rawWsServer,
  startBenchHost,
} from "./fixture.js";

/**
 * fanout: 100k events of one session → 100 followers, against raw `ws` sending the same
 * pre-encoded frames (goal ≥ 0.5× deliveries per server CPU-second).
 */
const FANOUT_EVENTS = 100_000;
const FANOUT_BATCH = 100;

interface Run {
  cpu: number;
  wall: number;
  exact: boolean;
}

const batch = (done: number) => deltas(FANOUT_BATCH, (i) => `token ${done + i}`);

async function fanoutSessionmux(clients: Clients): Promise<Run> {
  const host = await followedHost(clients, "fanout", FANOUT_EVENTS);
  try {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    for (let done = 0; done < FANOUT_EVENTS; done += FANOUT_BATCH) {
      const outcome = await host.store.append("fanout", batch(done));
      if (outcome.status !== "appended") throw new Error(outcome.status);
    }
    const reply = await clients.reply("done");
    return { cpu: cpuMs(cpu0), wall: performance.now() - t0, exact: reply.exact === true };
  } finally {
    await host.close();
  }
}

/** The store's share of the fanout run: the same appends with nobody following. */
async function appendsAlone(): Promise<number> {
  const host = await startBenchHost(freshDb());
  try {
    await newSession(host, "fanout");
    const cpu0 = process.cpuUsage();
    for (let done = 0; done < FANOUT_EVENTS; done += FANOUT_BATCH) {
      await host.store.append("fanout", batch(done));
    }
    return cpuMs(cpu0);
  } finally {
    await host.close();
  }
}

async function fanoutRawWs(clients: Clients): Promise<Run> {
  const raw = await rawWsServer();
  const frames: Uint8Array[] = [];
  for (let done = 0; done < FANOUT_EVENTS; done += FANOUT_BATCH) {
    const events = batch(done).map((e, i) => ({ seq: done + i + 1, at: Date.now(), ...e }));
    frames.push(encodeFrame({ type: "item", id: 1, value: { kind: "events", events } }));
  }
  try {
    clients.send({ op: "raw", url: raw.url, sockets: FOLLOWERS, until: FANOUT_EVENTS });
    await clients.reply("ready");
    await new Promise((r) => setTimeout(r, 50));
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    for (const frame of frames) {
      for (const socket of raw.server.clients) socket.send(frame);
      // Same pacing as commits arriving one after another: let the sockets write in between.
      await new Promise((r) => setImmediate(r));
    }
    const reply = await clients.reply("done");
    return { cpu: cpuMs(cpu0), wall: performance.now() - t0, exact: reply.exact === true };
  } finally {
    await raw.close();
  }
}

/**
 * Runs the scenario and returns its report lines. With `sessionmuxOnly` (a profiling aid) only the
 * sessionmux run is measured.
 */
export async function fanoutScenario(clients: Clients, sessionmuxOnly = false): Promise<string[]> {
  const deliveries = FANOUT_EVENTS * FOLLOWERS;
  const mux = await fanoutSessionmux(clients);
  if (sessionmuxOnly) {
    return [`sessionmux fanout: server CPU ${fmt(mux.cpu)} ms, wall ${fmt(mux.wall)} ms, exact ${mux.exact}`];
  }
  const raw = await fanoutRawWs(clients);
  const store = await appendsAlone();
  const muxRate = deliveries / (mux.cpu / 1000);
  const rawRate = deliveries / (raw.cpu / 1000);
  // The store's share was measured in another run, so it only informs; the verdict compares the
  // two subjects measured here, and a share larger than the whole run is reported, not floored.
  const muxPart =
    mux.cpu > store
      ? `mux part alone (store's separately measured CPU subtracted) ${fmt(deliveries / ((mux.cpu - store) / 1000) / rawRate, 2)}×`
      : "mux part alone not measurable (the store's separate run took more CPU than this one)";
  return [
    `fanout ${fmt(FANOUT_EVENTS)} events × ${FOLLOWERS} followers (${FANOUT_BATCH} per commit):`,
    `  sessionmux  server CPU ${fmt(mux.cpu)} ms (store appends alone, separate run: ${fmt(store)} ms), wall ${fmt(mux.wall)} ms, exact ${mux.exact}`,
    `  raw ws      server CPU ${fmt(raw.cpu)} ms, wall ${fmt(raw.wall)} ms, exact ${raw.exact}`,
    `  deliveries per server CPU-s: sessionmux ${fmt(muxRate)}, raw ws ${fmt(rawRate)}`,
    `  ratio ${fmt(muxRate / rawRate, 2)}× (${muxPart}), goal ≥ 0.5× — ${goal(muxRate / rawRate >= 0.5)}`,
  ];
}
