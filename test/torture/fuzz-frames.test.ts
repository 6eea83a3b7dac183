import { once } from "node:events";
import { encode } from "@msgpack/msgpack";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { decodeFrame, encodeFrame } from "../../protocol/codec.js";
import { checkHistory, isClean } from "../support/history-checker.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { MuxPeer } from "../support/mux-peer.js";
import { readWholeLog } from "../support/whole-log.js";
import { reportCounts, scaled } from "./torture-scale.js";

interface Answer {
  type?: unknown;
  id?: unknown;
}

/** A raw socket that hands each decoded host frame to whoever waits for it. */
class FuzzSocket {
  readonly frames: Answer[] = [];
  closeCode: number | undefined;
  private wake: (() => void) | undefined;

  private constructor(readonly ws: WebSocket) {
    ws.on("message", (data: Buffer) => {
      this.frames.push(
        decodeFrame(data, { maxStrBytes: 1 << 24, maxArrayLength: 1 << 20, maxValues: 1 << 25 }) as Answer,
      );
      this.wake?.();
    });
    ws.on("close", (code) => {
      this.closeCode = code;
      this.wake?.();
    });
    ws.on("error", () => {});
  }

  static async open(url: string): Promise<FuzzSocket> {
    const ws = new WebSocket(url, ["sessionmux.v1"], { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    const socket = new FuzzSocket(ws);
    await once(ws, "open");
    // The hello frame is not an answer to anything.
    while (socket.frames.length === 0) await socket.next(5_000);
    socket.frames.length = 0;
    return socket;
  }

  /** Resolves when a frame or the close arrives, or after `ms`. */
  next(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(finish, ms);
      function finish() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = finish;
    });
  }
}

/** The id the host will answer under, if the frame is a map carrying a valid id. */
function expectedId(bytes: Uint8Array): number | undefined {
  try {
    const frame = decodeFrame(bytes) as Answer;
    const id = frame?.id;
    return typeof id === "number" && Number.isSafeInteger(id) && id >= 1 ? id : undefined;
  } catch {
    return undefined;
  }
}

const TARGET = "fuzz-target";

function validFrame(random: () => number): Uint8Array {
  const id = 1 + Math.floor(random() * 1_000);
  const templates = [
    { type: "call", id, method: "session.list", params: { limit: 5 } },
    { type: "call", id, method: "session.page", params: { sessionId: TARGET, limit: 3 } },
    { type: "call", id, method: "session.models", params: {} },
    { type: "call", id, method: "session.search", params: { query: "chunk", limit: 3 } },
    { type: "open", id, method: "session.follow", params: { sessionId: TARGET, afterSeq: 0 } },
    { type: "close", id },
    { type: "call", id, method: "session.rename", params: { sessionId: "missing-session", title: "x" } },
  ];
  return encodeFrame(templates[Math.floor(random() * templates.length)]);
}

function mutate(bytes: Uint8Array, random: () => number): Uint8Array {
  const copy = Array.from(bytes);
  const edits = 1 + Math.floor(random() * 3);
  for (let e = 0; e < edits; e++) {
    const at = Math.floor(random() * Math.max(1, copy.length));
    const kind = Math.floor(random() * 5);
    if (kind === 0) copy[at] = Math.floor(random() * 256);
    else if (kind === 1) copy.splice(at, 1);
    else if (kind === 2) copy.splice(at, 0, Math.floor(random() * 256));
    else if (kind === 3) copy.length = at;
    else copy.splice(at, 0, 0xdc, 0xff, 0xff);
  }
  return Uint8Array.from(copy);
}

let host: TestHost | undefined;
afterEach(async () => {
  await host?.dispose();
});

describe("torture: fuzzed and mutated frames", () => {
  it("answers every frame, stays up and leaves a canary follower undisturbed", async () => {
    const total = scaled(50_000);
    host = await startTestHost();
    await host.store.create({ sessionId: TARGET, owner: "admin", model: "demo" });
    await host.store.create({ sessionId: "canary", owner: "admin", model: "demo" });
    const canary = await MuxPeer.connect(host.wsUrl, { token: ADMIN_TOKEN });
    const canaryStream = canary.follow("canary");
    const acked = [1];
    let fuzzing = true;
    const writer = (async () => {
      while (fuzzing) {
        const outcome = await host!.store.append("canary", [
          { type: "assistant/delta", data: { turnId: "t", text: "canary" } },
        ]);
        if (outcome.status === "appended") acked.push(outcome.events[0]!.seq);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();

    const anything = fc.sample(fc.anything({ maxDepth: 4, maxKeys: 6 }), {
      numRuns: Math.ceil(total / 2),
      seed: 7,
    });
    let seed = 12345;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    let socket = await FuzzSocket.open(host.wsUrl);
    let unanswered = 0;
    let oversize = 0;
    let unexpectedCloses = 0;
    for (let n = 0; n < total; n++) {
      let bytes: Uint8Array | string;
      if (n % 10_000 === 9_999) {
        bytes = new Uint8Array(1024 * 1024 + 16);
        oversize += 1;
      } else if (n % 1_000 === 500) bytes = "a text frame";
      else if (n % 2 === 0) {
        try {
          bytes = encode(anything[n / 2]);
        } catch {
          bytes = Uint8Array.of(0xc1);
        }
      } else bytes = mutate(validFrame(random), random);
      const id = typeof bytes === "string" ? undefined : expectedId(bytes);
      const seen = socket.frames.length;
      socket.ws.send(bytes);
      const answered = () =>
        socket.closeCode !== undefined ||
        socket.frames
          .slice(seen)
          .some((f) => (f.type === "error" && f.id === undefined) || (id !== undefined && f.id === id));
      const deadline = Date.now() + 5_000;
      while (!answered() && Date.now() < deadline) await socket.next(deadline - Date.now());
      if (socket.closeCode !== undefined) {
        const wasOversize = typeof bytes !== "string" && bytes.length > 1024 * 1024;
        if (!(wasOversize && socket.closeCode === 1009)) unexpectedCloses += 1;
        socket = await FuzzSocket.open(host.wsUrl);
      } else if (!answered()) unanswered += 1;
      // Keep the per-socket stream count low and the kept frames small.
      if (n % 500 === 499) {
        socket.ws.terminate();
        socket = await FuzzSocket.open(host.wsUrl);
      }
    }
    socket.ws.terminate();
    fuzzing = false;
    await writer;

    const head = acked.at(-1)!;
    await canary.waitSeq(canaryStream, head, 30_000);
    const observed = canary.events(canaryStream).map((event) => event.seq);
    const read = await readWholeLog(host.store, "canary");
    const log = read.status === "ok" ? read.events.map((event) => event.seq) : [];
    const report = checkHistory({ acknowledged: acked, log, observed });
    reportCounts("fuzz-frames", total, report);
    process.stdout.write(
      `torture fuzz-frames: frames=${total} unanswered=${unanswered} oversize=${oversize} unexpectedCloses=${unexpectedCloses}\n`,
    );
    // The host is still up and serving.
    const after = await canary.call<{ sessions: unknown[] }>("session.list", { limit: 5 });
    expect(after.sessions.length).toBeGreaterThan(0);
    expect(canary.terminal(canaryStream)).toBeUndefined();
    expect(unanswered).toBe(0);
    expect(unexpectedCloses).toBe(0);
    expect(isClean(report)).toBe(true);
    canary.ws.terminate();
  });
});
