/**
 * The client side of `bench/mux.bench.ts`, run in a child process so the host's process measures
 * only the host. Every client decodes every frame with the project's codec and checks that seqs
 * arrive exactly once and in order, for the mux and the raw baselines alike.
 */
import WebSocket from "ws";
import { decodeFrame, encodeFrame } from "../protocol/codec.js";
import { rawDataBytes } from "../src/transport/mux/raw-data.js";
import { wallNow } from "./harness/stats.js";

type Command = { op: string; [key: string]: unknown };
interface Frame {
  type: string;
  id?: number;
  value?: { kind: string; seq?: number; events?: { seq: number; data: { text: string } }[] };
}

const LIMITS = { maxStrBytes: 16 * 1024 * 1024, maxArrayLength: 1_000_000, maxValues: 2 ** 25 };
const reply = (message: Record<string, unknown>) => process.send?.(message);

/** One stream's order check: every seq continues the previous one. */
class SeqTracker {
  last: number;
  exact = true;
  constructor(afterSeq: number) {
    this.last = afterSeq;
  }
  take(events: { seq: number }[]): void {
    for (const e of events) {
      if (e.seq !== this.last + 1) this.exact = false;
      this.last = e.seq;
    }
  }
}

function muxSocket(url: string, token: string): WebSocket {
  return new WebSocket(url, ["sessionmux.v1"], {
    headers: { authorization: `Bearer ${token}` },
    perMessageDeflate: false,
  });
}

function frameOf(data: WebSocket.RawData): Frame {
  return decodeFrame(rawDataBytes(data), LIMITS) as Frame;
}

function follow(command: Command): void {
  const { url, token, sessionId, sockets, afterSeq, until, latency } = command as unknown as {
    url: string;
    token: string;
    sessionId: string;
    sockets: number;
    afterSeq: number;
    until: number;
    latency?: boolean;
  };
  const trackers: SeqTracker[] = [];
  const latencies: number[] = [];
  const all: WebSocket[] = [];
  let caughtUp = 0;
  let finished = 0;
  for (let i = 0; i < sockets; i++) {
    const tracker = new SeqTracker(afterSeq);
    trackers.push(tracker);
    const ws = muxSocket(url, token);
    all.push(ws);
    let reachedEnd = false;
    ws.on("message", (data) => {
      const frame = frameOf(data);
      if (frame.type === "hello") {
        ws.send(
          encodeFrame({ type: "open", id: 1, method: "session.follow", params: { sessionId, afterSeq } }),
        );
        return;
      }
      const value = frame.value;
      if (frame.type !== "item" || !value) {
        if (frame.type === "error") reply({ op: "failed", message: JSON.stringify(frame) });
        return;
      }
      if (value.kind === "caughtUp" && ++caughtUp === sockets) reply({ op: "ready" });
      if (value.kind !== "events" || !value.events) return;
      tracker.take(value.events);
      if (latency) {
        const now = wallNow();
        for (const e of value.events) latencies.push(now - Number(e.data.text));
      }
      if (!reachedEnd && tracker.last >= until) {
        reachedEnd = true;
        if (++finished === sockets) {
          reply({
            op: "done",
            exact: trackers.every((t) => t.exact && t.last === until),
            latencies: latency ? latencies : [],
          });
          for (const s of all) s.terminate();
        }
      }
    });
    ws.on("error", (err) => reply({ op: "failed", message: String(err) }));
    ws.on("close", (code) => {
      if (!reachedEnd)
        reply({ op: "failed", message: `follower ${i} closed with ${code} at seq ${tracker.last}` });
    });
  }
}

function raw(command: Command): void {
  const { url, sockets, until, latency } = command as unknown as {
    url: string;
    sockets: number;
    until: number;
    latency?: boolean;
  };
  const latencies: number[] = [];
  const trackers: SeqTracker[] = [];
  const all: WebSocket[] = [];
  let open = 0;
  let finished = 0;
  for (let i = 0; i < sockets; i++) {
    const tracker = new SeqTracker(0);
    trackers.push(tracker);
    const ws = new WebSocket(url, { perMessageDeflate: false });
    all.push(ws);
    ws.on("open", () => {
      if (++open === sockets) reply({ op: "ready" });
    });
    let reachedEnd = false;
    ws.on("message", (data) => {
      const frame = frameOf(data);
      if (frame.value?.kind !== "events" || !frame.value.events) return;
      tracker.take(frame.value.events);
      if (latency) {
        const now = wallNow();
        for (const e of frame.value.events) latencies.push(now - Number(e.data.text));
      }
      if (!reachedEnd && tracker.last >= until) {
        reachedEnd = true;
        if (++finished === sockets) {
          reply({ op: "done", exact: trackers.every((t) => t.exact && t.last === until), latencies });
          for (const s of all) s.terminate();
        }
      }
    });
    ws.on("error", (err) => reply({ op: "failed", message: String(err) }));
  }
}

let replaySocket: WebSocket | undefined;

function connect(command: Command): void {
  const ws = muxSocket(command.url as string, command.token as string);
  replaySocket = ws;
  ws.once("message", () => reply({ op: "connected" }));
  ws.on("error", (err) => reply({ op: "failed", message: String(err) }));
}

function replay(command: Command): void {
  const ws = replaySocket;
  if (!ws) return void reply({ op: "failed", message: "not connected" });
  const until = command.until as number;
  const tracker = new SeqTracker(0);
  ws.on("message", (data) => {
    const frame = frameOf(data);
    const value = frame.value;
    if (!value) return;
    if (value.kind === "events" && value.events) tracker.take(value.events);
    if (value.kind === "caughtUp") {
      reply({ op: "done", exact: tracker.exact && tracker.last === until });
      ws.terminate();
    }
  });
  ws.send(
    encodeFrame({ type: "open", id: 1, method: "session.follow", params: { sessionId: command.sessionId } }),
  );
}

const idle: WebSocket[] = [];

function openIdle(command: Command): void {
  const sockets = command.sockets as number;
  let ready = 0;
  for (let i = 0; i < sockets; i++) {
    const ws = muxSocket(command.url as string, command.token as string);
    idle.push(ws);
    ws.once("message", () => {
      if (++ready === sockets) reply({ op: "ready" });
    });
    ws.on("error", (err) => reply({ op: "failed", message: String(err) }));
  }
}

export function runClients(): void {
  process.on("message", (command: Command) => {
    try {
      if (command.op === "follow") follow(command);
      else if (command.op === "raw") raw(command);
      else if (command.op === "connect") connect(command);
      else if (command.op === "replay") replay(command);
      else if (command.op === "idle") openIdle(command);
      else if (command.op === "drop") {
        for (const ws of idle.splice(0)) ws.terminate();
        reply({ op: "dropped" });
      }
    } catch (err) {
      reply({ op: "failed", message: String(err) });
    }
  });
  process.on("disconnect", () => process.exit(0));
}
