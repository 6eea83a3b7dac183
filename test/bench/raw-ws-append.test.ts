import { describe, expect, it } from "vitest";
import WebSocket from "ws";
import { startRawWsAppend } from "../../bench/baselines/raw-ws-append.js";
import { decode, encode } from "../../bench/harness/shared-codec.js";
import { startSessionmux, writerName, writerToken } from "../../bench/scenarios/sessionmux-subject.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { until } from "../support/until.js";

type Frame = { type: string; name?: string; id?: number; value?: Record<string, unknown> };

/** The frames a socket receives for one rename, after the greeting (if any) went by. */
async function framesOfRename(url: string, token: string, sessionId: string): Promise<Frame[]> {
  const ws = new WebSocket(url, ["sessionmux.v1"], { headers: { authorization: `Bearer ${token}` } });
  const frames: Frame[] = [];
  ws.on("message", (data: Buffer) => frames.push(decode(data) as Frame));
  await new Promise((resolve) => ws.once("open", resolve));
  ws.send(encode({ type: "call", id: 7, method: "session.rename", params: { sessionId, title: "a title" } }));
  try {
    await until(() => frames.some((f) => f.type === "result"), 5_000, "the rename's result");
  } finally {
    ws.terminate();
  }
  return frames.filter((f) => f.type !== "hello");
}

/** A frame's shape: its kind and every key of its value, nested rows included. */
const shape = (frame: Frame) => ({
  type: frame.type,
  name: frame.name,
  keys: Object.keys(frame.value ?? {}).sort(),
  rowKeys: Object.keys((frame.value?.row as object | undefined) ?? {}).sort(),
});

const cleanups = cleanupsAfterEach();

describe("the raw ws append limit", () => {
  it("answers a rename with the frames sessionmux sends for it, row for row", async () => {
    const folder = tempDir("sessionmux-raw-ws-append-");
    cleanups.push(() => folder.remove());
    const raw = await startRawWsAppend(folder.file("raw.db"));
    cleanups.push(() => raw.close());
    const host = await startSessionmux({ writers: 1 });
    cleanups.push(() => host.close());
    await host.running.store.create({ sessionId: "bench-0", owner: writerName(0), model: "demo" });

    const fromHost = await framesOfRename(host.url, writerToken(0), "bench-0");
    const fromRaw = await framesOfRename(raw.url, "any", "bench-0");

    expect(fromHost.map(shape)).toEqual(fromRaw.map(shape));
    expect(fromRaw.map((f) => f.name ?? f.type)).toEqual(["session.updated", "result"]);
    const row = (frames: Frame[]) => frames[0]!.value!.row as Record<string, unknown>;
    expect(row(fromRaw)).toMatchObject({ sessionId: "bench-0", title: "a title", seq: 1 });
    expect(row(fromHost)).toMatchObject({ sessionId: "bench-0", title: "a title" });
  });
});
