/**
 * The load generator: a child process holding many follower connections of one kind, so the
 * subject under test has the parent's core to itself. Every kind receives the same items
 * (`{kind:"events", events}` per stream) and is checked for duplicates and gaps as it goes.
 */
import { encode } from "@msgpack/msgpack";
import { io, type Socket } from "socket.io-client";
import WebSocket from "ws";
import { DecodeCache } from "./decode-cache.js";
import type { FleetCommand, FleetConnect, FleetReply, FleetStats } from "./fleet-protocol.js";
import { cachingParser } from "./socketio-decode-cache.js";
import { wallNow } from "./stats.js";
import { sentAt } from "./workload.js";

interface StreamEvent {
  seq: number;
  data?: { text?: unknown };
}

interface Follower {
  last: Map<number, number>;
  ws?: WebSocket;
  sio?: Socket;
  opened: number;
}

const frames = new DecodeCache();
const decode = (bytes: Buffer): unknown => frames.decode(bytes);
let spec: FleetConnect | undefined;
const followers: Follower[] = [];
const targets = new Map<number, number>();
let remaining = 0;
let onTargets: (() => void) | undefined;
const stats: FleetStats = { events: 0, dup: 0, gap: 0, errors: [], latencies: [] };
let recordLatency = false;

function apply(follower: Follower, streamId: number, events: StreamEvent[]): void {
  const now = recordLatency ? wallNow() : 0;
  let last = follower.last.get(streamId) ?? 0;
  const before = last;
  for (const event of events) {
    if (event.seq <= last) stats.dup += 1;
    else if (event.seq > last + 1) stats.gap += event.seq - last - 1;
    if (event.seq > last) last = event.seq;
    stats.events += 1;
    if (recordLatency && stats.latencies.length < 200_000)
      stats.latencies.push(now - sentAt(event.data?.text));
  }
  follower.last.set(streamId, last);
  const target = targets.get(streamId);
  if (target !== undefined && before < target && last >= target) {
    remaining -= 1;
    if (remaining === 0) onTargets?.();
  }
}

function onMuxFrame(follower: Follower, bytes: Buffer): void {
  const frame = decode(bytes) as {
    type: string;
    id?: number;
    value?: { kind: string; events?: StreamEvent[] };
  };
  if (frame.type === "item" && frame.id !== undefined && frame.value) {
    if (frame.value.kind === "events") apply(follower, frame.id, frame.value.events ?? []);
    else if (frame.value.kind === "opened") follower.opened += 1;
    else if (frame.value.kind === "reset") follower.last.set(frame.id, 0);
  } else if (frame.type === "error" && stats.errors.length < 20) {
    stats.errors.push(JSON.stringify(frame));
  }
}

async function open(follower: Follower, index: number): Promise<void> {
  const s = spec!;
  const streams = s.streams;
  if (s.kind === "sio") {
    const socket =
      follower.sio ??
      io(s.url, { transports: ["websocket"], reconnection: false, forceNew: true, parser: cachingParser });
    follower.sio = socket;
    socket.removeAllListeners("events");
    socket.on("events", (streamId: number, events: StreamEvent[]) => apply(follower, streamId, events));
    if (!socket.connected) {
      socket.connect();
      await new Promise<void>((resolve, reject) => {
        socket.once("connect", () => resolve());
        socket.once("connect_error", reject);
      });
    }
    // A recovered socket keeps its rooms and gets what it missed; a fresh one asks for its backlog.
    if (!socket.recovered) {
      socket.emit(
        "follow",
        streams.map((st) => ({
          id: st.id,
          sessionId: st.sessionId,
          afterSeq: follower.last.get(st.id) ?? st.afterSeq,
        })),
      );
    }
    return;
  }
  const headers = s.token ? { authorization: `Bearer ${s.token}` } : undefined;
  const ws = new WebSocket(s.url, s.kind === "mux" ? ["sessionmux.v1"] : [], {
    ...(headers ? { headers } : {}),
    perMessageDeflate: false,
  });
  follower.ws = ws;
  ws.binaryType = "nodebuffer";
  follower.opened = 0;
  ws.on("message", (data: Buffer) => {
    if (s.kind === "mux") onMuxFrame(follower, data);
    else {
      const frame = decode(data) as { id: number; value: { events: StreamEvent[] } };
      apply(follower, frame.id, frame.value.events);
    }
  });
  ws.on("error", (error) => {
    if (stats.errors.length < 20) stats.errors.push(`conn ${index}: ${error.message}`);
  });
  await new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
  });
  const after = (id: number, afterSeq: number) => follower.last.get(id) ?? afterSeq;
  if (s.kind === "mux") {
    for (const st of streams) {
      ws.send(
        encode({
          type: "open",
          id: st.id,
          method: "session.follow",
          params: { sessionId: st.sessionId, afterSeq: after(st.id, st.afterSeq) },
        }),
      );
    }
  } else {
    ws.send(encode({ subscribe: streams.map((st) => [st.id, after(st.id, st.afterSeq)]) }));
  }
}

async function inBatches(
  count: number,
  concurrency: number,
  task: (i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(concurrency, count) }, async () => {
    while (next < count) {
      const i = next++;
      await task(i);
    }
  });
  await Promise.all(workers);
}

/** The underlying `ws` socket, also under a Socket.IO client (its websocket transport uses `ws` in Node). */
function socketOf(follower: Follower): WebSocket | undefined {
  if (follower.ws) return follower.ws;
  const engine = follower.sio?.io.engine as unknown as { transport?: { ws?: WebSocket } } | undefined;
  return engine?.transport?.ws;
}

function closeAll(): void {
  for (const follower of followers) {
    follower.sio?.disconnect();
    follower.ws?.terminate();
  }
}

function resetRemaining(): void {
  remaining = 0;
  for (const follower of followers)
    for (const [id, target] of targets) if ((follower.last.get(id) ?? 0) < target) remaining += 1;
}

async function handle(command: FleetCommand): Promise<FleetReply> {
  switch (command.cmd) {
    case "connect": {
      spec = command;
      recordLatency = command.recordLatency ?? false;
      const started = wallNow();
      // A stream opened after a seq counts from there: its first event is afterSeq + 1, not a gap.
      for (let i = 0; i < command.count; i++)
        followers.push({ last: new Map(command.streams.map((st) => [st.id, st.afterSeq])), opened: 0 });
      await inBatches(command.count, command.concurrency ?? 50, (i) => open(followers[i]!, i));
      return { ok: true, at: wallNow(), ms: wallNow() - started };
    }
    case "target": {
      targets.clear();
      for (const [id, seq] of command.targets) targets.set(id, seq);
      resetRemaining();
      if (remaining > 0) {
        const reached = new Promise<void>((resolve) => {
          onTargets = resolve;
        });
        const timeout = new Promise<"timeout">((resolve) =>
          setTimeout(() => resolve("timeout"), command.timeoutMs),
        );
        if ((await Promise.race([reached, timeout])) === "timeout")
          return { ok: false, at: wallNow(), ms: 0, error: `${remaining} follower streams short of target` };
      }
      return { ok: true, at: wallNow(), ms: 0 };
    }
    case "stats": {
      const cpu = process.cpuUsage();
      const copy = { ...stats, latencies: stats.latencies, cpuMs: (cpu.user + cpu.system) / 1000 };
      stats.latencies = [];
      return { ok: true, at: wallNow(), ms: 0, stats: copy };
    }
    case "stall":
      for (const follower of followers.slice(0, command.count)) socketOf(follower)?.pause();
      return { ok: true, at: wallNow(), ms: 0 };
    case "unstall":
      for (const follower of followers) socketOf(follower)?.resume();
      return { ok: true, at: wallNow(), ms: 0 };
    case "drop":
      for (const follower of followers) {
        if (follower.sio) follower.sio.io.engine.close();
        else follower.ws?.terminate();
      }
      return { ok: true, at: wallNow(), ms: 0 };
    case "reconnect": {
      const started = wallNow();
      await inBatches(followers.length, command.concurrency ?? 1000, (i) => open(followers[i]!, i));
      return { ok: true, at: started, ms: wallNow() - started };
    }
    case "reset":
      closeAll();
      followers.length = 0;
      targets.clear();
      Object.assign(stats, { events: 0, dup: 0, gap: 0, errors: [], latencies: [] });
      return { ok: true, at: wallNow(), ms: 0 };
    case "close":
      closeAll();
      setTimeout(() => process.exit(0), 50);
      return { ok: true, at: wallNow(), ms: 0 };
  }
}

process.on("message", (message: { seq: number; command: FleetCommand }) => {
  handle(message.command).then(
    (reply) => process.send?.({ seq: message.seq, reply }),
    (error: unknown) =>
      process.send?.({
        seq: message.seq,
        reply: {
          ok: false,
          at: wallNow(),
          ms: 0,
          error: error instanceof Error ? error.message : String(error),
        },
      }),
  );
});

process.send?.({ ready: true });
