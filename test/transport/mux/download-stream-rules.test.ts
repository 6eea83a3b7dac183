import { describe, expect, it } from "vitest";
import { SessionmuxError } from "../../../protocol/index.js";
import type { HostApi } from "../../../src/host/host-api.js";
import { ADMIN } from "../../../src/host/principal.js";
import type { AttachmentBody } from "../../../src/store/session-store.js";
import {
  DOWNLOAD_HIGH_WATER_BYTES,
  DOWNLOAD_PIECE_BYTES,
  DownloadStream,
} from "../../../src/transport/mux/download-stream.js";
import { StreamOutlet } from "../../../src/transport/mux/stream-outlet.js";
import { RecordingWriter } from "./recording-writer.js";

/**
 * One `session.download` stream driven step by step: the stored body and the socket's backlog are
 * in the test's hands (`RecordingWriter`). The socket-level behaviour is proven against a real
 * host in `download-stream.test.ts`; this pins the mark, the body's size checks, the logging of
 * faults and what a stop releases.
 */
const KIB = 1024;

type Item = { kind: "head"; size: number } | { kind: "bytes"; offset: number; bytes: Uint8Array };

/** Lets every pending promise callback run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

function harness(chunks: readonly (Uint8Array | Error)[], size: number, params: { offset?: number } = {}) {
  const writer = new RecordingWriter();
  let finished = 0;
  const outlet = new StreamOutlet(3, writer.asFrameWriter(), () => {
    finished++;
  });
  const read = { pulls: 0, returned: 0 };
  let openAttachment: () => Promise<AttachmentBody> = async () => ({
    attachmentId: "a",
    owner: "admin",
    name: "a.bin",
    type: "x/y",
    size,
    chunks: () => ({
      [Symbol.asyncIterator]: () => {
        let index = 0;
        return {
          async next() {
            read.pulls++;
            const chunk = chunks[index++];
            if (chunk instanceof Error) throw chunk;
            return chunk ? { value: chunk, done: false as const } : { value: undefined, done: true as const };
          },
          async return() {
            read.returned++;
            return { value: undefined, done: true as const };
          },
        };
      },
    }),
  });
  const logged: { err: unknown; context: string }[] = [];
  const host = { openAttachment: () => openAttachment() } as unknown as HostApi;
  const stream = new DownloadStream(
    { host, principal: ADMIN, outlet, logInternal: (err, context) => logged.push({ err, context }) },
    { sessionId: "s", attachmentId: "a", ...params },
  );
  return {
    writer,
    stream,
    read,
    logged,
    finished: () => finished,
    items: () => writer.values as Item[],
    pieces: () => (writer.values as Item[]).filter((item) => item.kind === "bytes"),
    holdOpen(): () => void {
      let release: () => void = () => undefined;
      const real = openAttachment;
      openAttachment = () => new Promise<AttachmentBody>((resolve) => (release = () => resolve(real())));
      return () => release();
    },
  };
}

const bytes = (n: number, fill = 1) => new Uint8Array(n).fill(fill);

describe("a session.download stream, step by step", () => {
  it("reads the next stored chunk only with the backlog at most at the mark, and goes on once the backlog reached the kernel", async () => {
    const h = harness([bytes(256 * KIB, 1), bytes(256 * KIB, 2), bytes(10, 3)], 512 * KIB + 10);
    // each message sent adds 65 KiB to the backlog: the head takes it exactly to the mark, still room
    h.writer.growth = 65 * KIB;
    // the documented mark (protocol-v1 §5): 256 KiB
    h.writer.buffered = 256 * KIB - h.writer.growth;
    const started = h.stream.start();
    await settle();
    // the first chunk's four pieces went, and with them the backlog past the mark
    expect(h.pieces()).toHaveLength(4);
    expect(h.read.pulls).toBe(1);
    expect(h.writer.waiters.size).toBe(1);
    h.writer.drain();
    await settle();
    expect(h.pieces()).toHaveLength(8);
    expect(h.read.pulls).toBe(2);
    h.writer.drain();
    await started;
    expect(h.pieces().map((piece) => piece.offset)).toEqual([
      0,
      64 * KIB,
      128 * KIB,
      192 * KIB,
      256 * KIB,
      320 * KIB,
      384 * KIB,
      448 * KIB,
      512 * KIB,
    ]);
    expect(h.pieces().every((piece) => piece.bytes.byteLength <= DOWNLOAD_PIECE_BYTES)).toBe(true);
    expect(h.finished()).toBe(1);
    expect(h.writer.errors).toEqual([]);
  });

  it("a body that ends short of its size, or runs past it, ends the stream attachment_not_found, unlogged", async () => {
    for (const [chunks, size] of [
      [[bytes(100)], 101],
      [[bytes(100), bytes(2)], 101],
      [[], 1],
    ] as const) {
      const h = harness(chunks, size);
      await h.stream.start();
      expect(h.writer.errors).toEqual([expect.objectContaining({ code: "attachment_not_found" })]);
      expect(h.pieces().reduce((n, piece) => n + piece.bytes.byteLength, 0)).toBeLessThanOrEqual(100);
      expect(h.logged).toEqual([]);
      expect(h.read.returned).toBe(1);
    }
  });

  it("a fault reading the body ends the stream internal_error and is logged once as session.download; a refusal is not logged", async () => {
    const fault = new Error("disk on fire");
    const h = harness([bytes(10), fault], 20);
    await h.stream.start();
    expect(h.writer.errors).toEqual([expect.objectContaining({ code: "internal_error" })]);
    expect(h.logged).toEqual([{ err: fault, context: "session.download" }]);

    const refused = harness([new SessionmuxError("attachment_not_found", "gone")], 20);
    await refused.stream.start();
    expect(refused.writer.errors).toEqual([expect.objectContaining({ code: "attachment_not_found" })]);
    expect(refused.logged).toEqual([]);
  });

  it("stopped while it waits for the backlog: the wait is withdrawn, the body's read closed, nothing more read or sent", async () => {
    const h = harness([bytes(256 * KIB), bytes(256 * KIB), bytes(256 * KIB)], 768 * KIB);
    h.writer.growth = DOWNLOAD_HIGH_WATER_BYTES;
    const started = h.stream.start();
    await settle();
    expect(h.writer.waiters.size).toBe(1);
    const sent = h.items().length;
    h.stream.stop();
    // the start settles without the socket ever draining
    await started;
    expect(h.writer.waiters.size).toBe(0);
    expect(h.read.returned).toBe(1);
    h.writer.drain();
    await settle();
    expect(h.read.pulls).toBe(1);
    expect(h.items()).toHaveLength(sent);
    expect(h.writer.errors).toEqual([]);
    // a second stop does nothing more
    h.stream.stop();
    expect(h.read.returned).toBe(1);
  });

  it("stopped while the attachment is opened: nothing is sent and nothing read", async () => {
    const h = harness([bytes(10)], 10);
    const release = h.holdOpen();
    const started = h.stream.start();
    h.stream.stop();
    release();
    await started;
    expect(h.items()).toEqual([]);
    expect(h.read.pulls).toBe(0);
  });

  it("from an offset: the pieces start there, inside a later stored chunk; past the size it is refused", async () => {
    const h = harness([bytes(256 * KIB, 1), bytes(256 * KIB, 2)], 512 * KIB, { offset: 300 * KIB });
    await h.stream.start();
    expect(h.pieces().map((piece) => [piece.offset, piece.bytes.byteLength, piece.bytes[0]])).toEqual([
      [300 * KIB, 64 * KIB, 2],
      [364 * KIB, 64 * KIB, 2],
      [428 * KIB, 64 * KIB, 2],
      [492 * KIB, 20 * KIB, 2],
    ]);
    const past = harness([bytes(10)], 10, { offset: 11 });
    await past.stream.start();
    expect(past.writer.errors).toEqual([
      expect.objectContaining({ code: "bad_request", data: { field: "/offset", size: 10 } }),
    ]);
    expect(past.items()).toEqual([]);
    expect(past.read.pulls).toBe(0);
  });
});
