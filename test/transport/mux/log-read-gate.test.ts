import { setImmediate as nextTurn } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { LogReadGate } from "../../../src/transport/mux/log-read-gate.js";
import { RecordingWriter } from "./recording-writer.js";

const HIGH_WATER = 1000;

/** A read the test ends: `started` says whether it began, `end` finishes it. */
function read(name: string, log: string[]) {
  let end: () => void = () => undefined;
  let started = false;
  const work = () => {
    started = true;
    log.push(name);
    return new Promise<string>((resolve) => {
      end = () => resolve(name);
    });
  };
  return {
    work,
    get started() {
      return started;
    },
    end: () => end(),
  };
}

describe("LogReadGate (protocol-v1 §7: a socket's log reads, a few at a time, each once its backlog allows)", () => {
  it("starts a read at once, in the caller's turn, while a place is free and the backlog allows", () => {
    const writer = new RecordingWriter();
    const gate = new LogReadGate(writer.asFrameWriter(), HIGH_WATER, 2);
    const log: string[] = [];
    const a = read("a", log);
    void gate.run(a.work);
    expect(a.started).toBe(true);
  });

  it("starts waiting reads in the order they came; one asked while others wait goes after them", async () => {
    const writer = new RecordingWriter();
    const gate = new LogReadGate(writer.asFrameWriter(), HIGH_WATER, 1);
    const log: string[] = [];
    const [a, b, c] = [read("a", log), read("b", log), read("c", log)];
    const done = [gate.run(a.work), gate.run(b.work)];
    expect(log).toEqual(["a"]);
    await nextTurn();
    // a's place is still taken: b waits
    expect(log).toEqual(["a"]);
    a.end();
    await done[0];
    // a place is free, but b came first: c queues behind it, though it could start now
    done.push(gate.run(c.work));
    expect(log).toEqual(["a"]);
    await nextTurn();
    expect(log).toEqual(["a", "b"]);
    b.end();
    await done[1];
    await nextTurn();
    expect(log).toEqual(["a", "b", "c"]);
    c.end();
    expect(await Promise.all(done)).toEqual(["a", "b", "c"]);
  });

  it("starts at most `concurrency` reads in one turn of the event loop, however fast each ends", async () => {
    const writer = new RecordingWriter();
    const gate = new LogReadGate(writer.asFrameWriter(), HIGH_WATER, 2);
    // a read of SQLite answers at once: each read asks the next as it ends, as a stream does
    let startedThisTurn = 0;
    let turnEnded = false;
    const chain = (left: number): Promise<void> =>
      gate
        .run(async () => {
          if (!turnEnded) startedThisTurn++;
        })
        .then(() => (left > 1 ? chain(left - 1) : undefined));
    const turn = nextTurn().then(() => {
      turnEnded = true;
    });
    const all = chain(6);
    await turn;
    expect(startedThisTurn).toBe(2);
    await all;
  });

  it("holds reads while the backlog is above the mark, and starts them when the socket drains", async () => {
    const writer = new RecordingWriter();
    const gate = new LogReadGate(writer.asFrameWriter(), HIGH_WATER, 4);
    const log: string[] = [];
    const a = read("a", log);
    const b = read("b", log);
    void gate.run(a.work);
    // the backlog grows past the mark while a runs: b waits, through a's end and later turns
    writer.buffered = HIGH_WATER + 1;
    void gate.run(b.work);
    a.end();
    await nextTurn();
    await nextTurn();
    expect(log).toEqual(["a"]);
    expect(writer.drainRequests).toBe(1);
    writer.drain();
    await nextTurn();
    expect(log).toEqual(["a", "b"]);
  });

  it("never starts a read held for a socket that closed, nor waits for its drain", async () => {
    const writer = new RecordingWriter();
    const gate = new LogReadGate(writer.asFrameWriter(), HIGH_WATER, 4);
    const log: string[] = [];
    writer.buffered = HIGH_WATER + 1;
    writer.open = false;
    void gate.run(read("a", log).work);
    await nextTurn();
    await nextTurn();
    expect(log).toEqual([]);
    expect(writer.drainRequests).toBe(0);
  });
});
