import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { decodeFrame } from "../../protocol/codec.js";
import { WsFrameReader } from "./ws-frame-reader.js";

/** One traced system call that wrote bytes to, or synced, a file or socket. */
export interface TracedCall {
  /** Position in the trace: the calls of one thread are in program order. */
  index: number;
  kind: "write" | "sync";
  /** The descriptor the call used. */
  fd: number;
  /** What the descriptor pointed at (`strace -yy`): a path, or `TCP:[local->remote]`. */
  target: string;
  /** The bytes the call wrote (only the `= n` bytes the kernel took). */
  bytes: Buffer;
}

/** A host frame taken from a socket's byte stream, and the call that wrote its last byte. */
export interface TracedFrame {
  target: string;
  writtenBy: number;
  frame: { type?: string; id?: number; value?: unknown };
}

/** System calls that move bytes toward a file or socket, or make them durable. */
const WRITES = ["write", "writev", "pwrite64", "pwritev", "pwritev2", "sendto", "sendmsg"];
const SYNCS = ["fsync", "fdatasync", "sync_file_range"];

/** True when `strace` can run here. */
export function straceAvailable(): boolean {
  return spawnSync("strace", ["-V"], { stdio: "ignore" }).status === 0;
}

/** The command prefix that traces a process and its threads into `outFile`, every byte in hex. */
export function straceWrapper(outFile: string): string[] {
  return [
    "strace",
    "-f",
    "-qq",
    "-yy",
    "-xx",
    "-s",
    "1048576",
    "-e",
    `trace=${[...WRITES, ...SYNCS]}`,
    "-o",
    outFile,
  ];
}

const CALL = /^(\d+)\s+(\w+)\((\d+)<((?:TCP|TCPv6|UDP|UNIX)[^\]]*\]|[^>]*)>(.*)$/;
const RESUMED = /^(\d+)\s+<\.\.\. (\w+) resumed>(.*)$/;
const HEX_STRING = /"((?:\\x[0-9a-f]{2})*)"/g;
const RESULT = /\)\s+=\s+(-?\d+)/;

/** Parses an `strace -f -yy -xx` log into the write and sync calls it holds, in trace order. */
export function readTrace(file: string): TracedCall[] {
  const calls: TracedCall[] = [];
  const pending = new Map<string, { call: TracedCall; args: string }>();
  const finish = (call: TracedCall, args: string, tail: string) => {
    const result = RESULT.exec(tail);
    const written = result ? Number(result[1]) : -1;
    if (call.kind === "write") {
      if (written <= 0) return;
      const parts = [...args.matchAll(HEX_STRING)].map((m) =>
        Buffer.from(m[1]!.replaceAll("\\x", ""), "hex"),
      );
      call.bytes = Buffer.concat(parts).subarray(0, written);
    } else if (written !== 0) return;
    calls.push(call);
  };
  for (const line of readFileSync(file, "utf8").split("\n")) {
    const resumed = RESUMED.exec(line);
    if (resumed) {
      const open = pending.get(resumed[1]!);
      pending.delete(resumed[1]!);
      if (open) finish(open.call, open.args + resumed[3]!, resumed[3]!);
      continue;
    }
    const match = CALL.exec(line);
    if (!match) continue;
    const [, pid, name, fd, target, rest] = match as unknown as [
      string,
      string,
      string,
      string,
      string,
      string,
    ];
    const kind = WRITES.includes(name) ? "write" : SYNCS.includes(name) ? "sync" : undefined;
    if (!kind) continue;
    const call: TracedCall = {
      index: calls.length,
      kind,
      fd: Number(fd),
      target: unhex(target),
      bytes: Buffer.alloc(0),
    };
    if (rest.endsWith("<unfinished ...>")) pending.set(pid, { call, args: rest });
    else finish(call, rest, rest);
  }
  calls.forEach((call, index) => {
    call.index = index;
  });
  return calls;
}

/** `-xx` prints paths in hex too. */
function unhex(text: string): string {
  return text.replace(/(?:\\x[0-9a-f]{2})+/g, (run) =>
    Buffer.from(run.replaceAll("\\x", ""), "hex").toString(),
  );
}

/**
 * Decodes the host's WebSocket messages on each upgraded connection, in the order written.
 * Streams are told apart by descriptor, not by the name strace gave it: when strace cannot look a
 * socket up in time it prints `socket:[inode]` instead of `TCP:[a->b]`, and keying on that name
 * would drop the write and desynchronise the stream. A descriptor reused by a later connection
 * starts over at its `101` answer.
 */
export function hostFrames(calls: readonly TracedCall[]): TracedFrame[] {
  const readers = new Map<number, WsFrameReader | null>();
  const frames: TracedFrame[] = [];
  for (const call of calls) {
    if (call.kind !== "write" || call.target.startsWith("/")) continue;
    const upgrade = call.bytes.subarray(0, 12).toString() === "HTTP/1.1 101";
    let reader = readers.get(call.fd);
    if (reader === undefined || upgrade) {
      reader = upgrade ? new WsFrameReader() : null;
      readers.set(call.fd, reader);
    }
    for (const message of reader?.push(call.bytes) ?? []) {
      frames.push({
        target: call.target,
        writtenBy: call.index,
        frame: decodeFrame(message, { maxValues: 2 ** 25 }) as TracedFrame["frame"],
      });
    }
  }
  return frames;
}
