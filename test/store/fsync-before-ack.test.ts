import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { MuxPeer } from "../support/mux-peer.js";
import {
  hostFrames,
  readTrace,
  straceAvailable,
  straceWrapper,
  type TracedCall,
} from "../support/syscall-trace.js";
import { tempDir } from "../support/temp-dir.js";
import { until } from "../support/until.js";
import { spawnCliHost } from "../torture/cli-host.js";

const TOKEN = "fsync-probe-token";
const RENAMES = 30;
const traced = straceAvailable();

/** The pid of the traced `sessionmux serve` (strace's only child). */
function tracedPid(stracePid: number): number {
  const children = readFileSync(`/proc/${stracePid}/task/${stracePid}/children`, "utf8").trim();
  return Number(children.split(/\s+/)[0]);
}

/**
 * Promise 1 of docs/reliability.md, seen from outside: a real `sessionmux serve` runs under
 * `strace`; every acknowledgement it writes to a client socket (a call's result carrying the
 * committed seq, a follow item carrying the event) must come after the WAL bytes holding that
 * event were written AND synced. Kill -9 cannot tell (the page cache survives it); this can:
 * `synchronous = OFF` or `NORMAL` (no sync at commit in WAL mode) fails it.
 */
describe("durability you can see", () => {
  // CI installs strace (.ci/run): there a missing tracer is a failure, not a skip.
  it.skipIf(!traced && process.env.CI !== "true")(
    "acknowledges an event only after a sync of the WAL that holds it",
    async () => {
      expect(traced, "strace is required (apt-get install strace)").toBe(true);
      const dir = tempDir("sessionmux-fsync-");
      const traceFile = dir.file("trace.txt");
      const host = await spawnCliHost({
        dbPath: dir.file("sessions.db"),
        token: TOKEN,
        wrapper: straceWrapper(traceFile),
      });
      const markers = new Map<number, string>();
      const calls = new Map<number, number>();
      let followId = 0;
      try {
        const writer = await MuxPeer.connect(host.wsUrl, { token: TOKEN });
        const follower = await MuxPeer.connect(host.wsUrl, { token: TOKEN });
        await writer.call("session.create", { sessionId: "probe" });
        followId = follower.follow("probe");
        for (let i = 0; i < RENAMES; i++) {
          const marker = `probe-title-${i}-${Math.random().toString(36).slice(2)}`;
          const id = writer.nextId();
          writer.send({
            type: "call",
            id,
            method: "session.rename",
            params: { sessionId: "probe", title: marker },
          });
          const answer = await until(() => writer.of(id).find((f) => f.type === "result"), 20_000, "rename");
          const seq = (answer.value as { seq: number }).seq;
          markers.set(seq, marker);
          calls.set(id, seq);
        }
        await follower.waitSeq(followId, Math.max(...markers.keys()));
        // A write the peer already read can still lack its result line in the trace: strace logs
        // a call when it handles the call's exit, and a kill before that leaves "= ?". The host
        // writes this answer on the same thread after those writes, so once it arrives their
        // exits were handled and logged.
        await writer.call("session.list", {});
        await writer.disconnect();
        await follower.disconnect();
      } finally {
        process.kill(tracedPid(host.child.pid!), "SIGKILL");
        await new Promise<void>((resolve) => {
          if (host.child.exitCode !== null) resolve();
          else host.child.once("exit", () => resolve());
        });
      }
      // the trace stays on disk when an assertion fails, named in the message, to be read
      const trace = readTrace(traceFile);

      const wal = (call: TracedCall) => call.target.endsWith("-wal");
      const frames = hostFrames(trace);
      /** Every acknowledgement of a probe event: the trace index that put it on the wire. */
      const acks: { seq: number; at: number }[] = [];
      for (const { frame, writtenBy } of frames) {
        if (frame.type === "result" && frame.id !== undefined && calls.has(frame.id))
          acks.push({ seq: calls.get(frame.id)!, at: writtenBy });
        const value = frame.value as { kind?: string; events?: { seq: number }[] } | undefined;
        if (frame.type === "item" && frame.id === followId && value?.kind === "events")
          for (const event of value.events ?? [])
            if (markers.has(event.seq)) acks.push({ seq: event.seq, at: writtenBy });
      }
      // every rename answered once and every renamed event delivered once to the follower
      expect(acks.length, `acknowledgements decoded from ${traceFile}`).toBe(RENAMES * 2);

      const unsynced: string[] = [];
      for (const { seq, at } of acks) {
        const marker = Buffer.from(markers.get(seq)!);
        const written = trace.find(
          (call) => call.kind === "write" && wal(call) && call.bytes.includes(marker),
        );
        const synced =
          written && trace.find((call) => call.index > written.index && call.kind === "sync" && wal(call));
        if (!written || written.index > at) unsynced.push(`seq ${seq}: acknowledged before its WAL write`);
        else if (!synced || synced.index > at)
          unsynced.push(`seq ${seq}: acknowledged before the WAL was synced`);
      }
      expect(unsynced, `checked against ${traceFile}`).toEqual([]);
      dir.remove();
    },
    120_000,
  );
});
