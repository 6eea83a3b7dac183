import { describe, expect, it } from "vitest";
import { decodeFrame, encodeFrame } from "../../../protocol/codec.js";
import { SessionmuxError } from "../../../protocol/index.js";
import { StreamOutlet } from "../../../src/transport/mux/stream-outlet.js";
import { RecordingWriter } from "./recording-writer.js";

/**
 * The sending side of one logical stream (protocol-v1 §3): items on its id, then exactly one
 * `end` or `error`, after which nothing more is sent for the id and it is freed once.
 */

function outletOf(id: number) {
  const writer = new RecordingWriter();
  let freed = 0;
  const outlet = new StreamOutlet(id, writer.asFrameWriter(), () => {
    freed++;
  });
  /** The item messages as the peer reassembles them (head, then value), and the other frames. */
  const sent = () => [
    ...writer.heads.map((head, i) => decodeFrame(Buffer.concat([head, writer.bodies[i]!]))),
    ...writer.frames,
  ];
  return { writer, outlet, sent, freed: () => freed };
}

describe("StreamOutlet", () => {
  it("sends every item on its id, a shared one first included", () => {
    for (const first of ["shared", "encoded", "value"] as const) {
      const { outlet, sent } = outletOf(9);
      if (first === "shared") outlet.itemShared(encodeFrame({ n: 1 }));
      if (first === "encoded") outlet.itemEncoded(encodeFrame({ n: 1 }));
      if (first === "value") outlet.item({ n: 1 });
      outlet.itemShared(encodeFrame({ n: 2 }));
      outlet.itemEncoded(encodeFrame({ n: 3 }));
      outlet.item({ n: 4 });
      expect([first, sent()]).toEqual([
        first,
        [1, 2, 3, 4].map((n) => ({ type: "item", id: 9, value: { n } })),
      ]);
    }
  });

  it("ends once: after end, a second end, an error or an item sends nothing, and the id is freed once", () => {
    const { outlet, sent, freed } = outletOf(4);
    outlet.item("a");
    expect(outlet.finished).toBe(false);
    outlet.end();
    expect(outlet.finished).toBe(true);
    outlet.end();
    outlet.fail(new SessionmuxError("internal_error", "late"));
    outlet.item("b");
    outlet.itemEncoded(encodeFrame("c"));
    outlet.itemShared(encodeFrame("d"));
    outlet.release();
    expect(sent()).toEqual([
      { type: "item", id: 4, value: "a" },
      { type: "end", id: 4 },
    ]);
    expect(freed()).toBe(1);
  });

  it("fails once: after an error nothing more is sent; a released stream sends nothing at all", () => {
    const failed = outletOf(6);
    failed.outlet.fail(new SessionmuxError("host_shutting_down", "bye"));
    failed.outlet.end();
    failed.outlet.fail(new SessionmuxError("internal_error", "again"));
    failed.outlet.itemShared(encodeFrame("x"));
    expect(failed.sent()).toEqual([
      { type: "error", id: 6, error: expect.objectContaining({ code: "host_shutting_down" }) },
    ]);
    expect(failed.freed()).toBe(1);

    const released = outletOf(8);
    released.outlet.release();
    released.outlet.release();
    released.outlet.end();
    released.outlet.fail(new SessionmuxError("internal_error", "gone"));
    released.outlet.item("y");
    expect(released.outlet.finished).toBe(true);
    expect(released.sent()).toEqual([]);
    expect(released.freed()).toBe(1);
  });
});
