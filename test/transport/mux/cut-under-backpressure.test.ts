import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../../support/host.js";
import { MuxPeer } from "../../support/mux-peer.js";
import { until } from "../../support/until.js";
import { createSession } from "./mux-fixture.js";

/**
 * A peer that goes away while its answers are held back: the host must let its socket go and go
 * on serving. The host runs in a process of its own: were its event loop to stop turning, this
 * process still turns, and the test fails within its bounds instead of hanging with the host.
 */

const script = fileURLToPath(new URL("./host-process.ts", import.meta.url));
const root = fileURLToPath(new URL("../../../", import.meta.url));
const CALLS = 6;

const children: ChildProcess[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = once(child, "exit");
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
    await exited;
    clearTimeout(timer);
  }
});

interface HostProcess {
  wsUrl: string;
  attachmentId: string;
  /** Resolves once the host has opened `count` attachment bodies in all. */
  opened(count: number): Promise<void>;
}

async function startHostProcess(mux: Record<string, unknown>): Promise<HostProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", script, JSON.stringify(mux)], {
    cwd: root,
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.push(child);
  let out = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    out += chunk.toString("utf8");
  });
  const exited = once(child, "exit").then(() => {
    throw new Error(`the host process exited: ${out}`);
  });
  const ready = until(() => /ready (.+)\n/.exec(out)?.[1], 30_000, "the host process to listen");
  const started = JSON.parse(await Promise.race([ready, exited])) as { wsUrl: string; attachmentId: string };
  return {
    ...started,
    opened: async (count) => {
      await until(() => out.includes(`attachment opened ${count}\n`), 10_000, `${count} attachments opened`);
    },
  };
}

/** `promise`, or a failure naming `what` once `ms` have passed without it. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

async function connections(wsUrl: string): Promise<number> {
  const url = new URL("/metrics", wsUrl.replace(/^ws/, "http"));
  const res = await fetch(url, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  return Number(/^sessionmux_connections (\d+)$/m.exec(await res.text())?.[1]);
}

describe("a socket cut under backpressure", () => {
  it("while an answer streams, another waits behind it and calls wait for a slot: the host lets the socket go and serves the next one", async () => {
    // 16 MiB answers to a peer that reads nothing: the first one's backlog stays past the mark
    const host = await startHostProcess({
      maxCallsInFlight: 2,
      maxQueuedCalls: 16,
      sendHighWaterBytes: 64 * 1024,
    });
    const peer = await MuxPeer.connect(host.wsUrl, { token: ADMIN_TOKEN });
    const sessionId = await createSession(peer);
    peer.pause();
    for (let i = 0; i < CALLS; i++)
      peer.send({
        type: "call",
        id: peer.nextId(),
        method: "session.attachment",
        params: { sessionId, attachmentId: host.attachmentId },
      });
    // both slots took a call: one answer streams, the other waits behind it, the rest wait for a slot
    await host.opened(2);
    // the peer's kernel holds answers it never read: it resets the connection
    peer.ws.terminate();
    const next = await within(
      MuxPeer.connect(host.wsUrl, { token: ADMIN_TOKEN }),
      10_000,
      "a new socket to the host",
    );
    try {
      expect(await within(next.call("session.models"), 10_000, "a call on the new socket")).toHaveProperty(
        "default",
      );
      await until(async () => (await connections(host.wsUrl)) === 1, 10_000, "the cut socket let go");
    } finally {
      await next.disconnect();
    }
  });
});
