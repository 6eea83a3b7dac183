import { describe, expect, it } from "vitest";
import { encodeFrame } from "../../../protocol/codec.js";
import { Limits } from "../../../protocol/limits.js";
import { createSession, openCanary } from "./mux-fixture.js";
import { refusalHost } from "./refusal-host.js";

/**
 * The values one client frame may hold in all (protocol-v1 §7, 4,096 by default): a frame of
 * 1 MiB within every other limit could hold 90 maps of 1,000 entries, each decoded into an object
 * of its own on the host's event loop. Past the bound the frame is `bad_frame` without id, refused
 * before it is decoded; nothing durable changes and the socket's streams and calls go on.
 */

/** `count` maps of 1,000 entries each, as a frame's params: 2,001 values a map. */
function manyMaps(count: number): Record<string, Record<string, number>> {
  const params: Record<string, Record<string, number>> = {};
  for (let m = 0; m < count; m++) {
    const entries: Record<string, number> = {};
    for (let k = 0; k < 1_000; k++) entries[`k${String(k).padStart(8, "0")}`] = k & 0x7f;
    params[`m${m}`] = entries;
  }
  return params;
}

/** A `session.models` call whose params hold `n` small integers, and the values of the whole frame. */
function callWithItems(id: number, n: number): { id: number; frame: Uint8Array; values: number } {
  const frame = encodeFrame({
    type: "call",
    id,
    method: "session.models",
    params: { a: new Array(n).fill(1) },
  });
  // the frame's map, its 4 keys and 3 scalars; the params map, its key, the array, its items
  return { id, frame, values: 1 + 4 + 3 + 1 + 1 + 1 + n };
}

describe("a client frame holding more values than the bound", () => {
  let canary: Awaited<ReturnType<typeof openCanary>>;
  let sessionId: string;

  const shared = refusalHost(async (host, peer) => {
    canary = await openCanary(host, peer);
    sessionId = await createSession(peer);
  });

  it("90,000 map entries in under 1 MiB → bad_frame without id; nothing written, the socket goes on", async () => {
    const { peer } = shared;
    const id = peer.nextId();
    const frame = encodeFrame({ type: "call", id, method: "session.models", params: manyMaps(90) });
    expect(frame.length).toBeLessThan(Limits.maxPayloadBytes);
    const seen = peer.unidentifiedErrors().length;
    peer.sendRaw(frame);
    const error = await peer.waitUnidentifiedError(seen + 1);
    expect(error).toMatchObject({
      code: "bad_frame",
      category: "protocol",
      message: expect.stringContaining(`more than ${Limits.maxValues} values`),
      data: { offset: expect.any(Number) },
    });
    expect(peer.of(id)).toEqual([]);
    shared.expectUnchanged();
    await canary.check();
    // the socket still takes calls
    expect(await peer.call<{ models: unknown[] }>("session.models", {})).toHaveProperty("models");
  });

  it("at the bound the frame is decoded (its params then refused on its id); one value more is not", async () => {
    const { peer } = shared;
    const items = Limits.maxValues - callWithItems(0, 0).values;
    const at = callWithItems(peer.nextId(), items);
    expect(at.values).toBe(Limits.maxValues);
    peer.sendRaw(at.frame);
    expect((await peer.waitTerminal(at.id)).error).toMatchObject({ code: "bad_request" });

    const over = callWithItems(peer.nextId(), items + 1);
    const seen = peer.unidentifiedErrors().length;
    peer.sendRaw(over.frame);
    expect((await peer.waitUnidentifiedError(seen + 1)).code).toBe("bad_frame");
    expect(peer.of(over.id)).toEqual([]);
    await canary.check();
  });

  it("the largest prompt the params allow (32 attachments, every field, long text) is accepted", async () => {
    const { peer } = shared;
    const attachments = Array.from({ length: 32 }, (_, i) => ({
      name: `picture-${i}.png`,
      type: "image/png",
      bytes: new Uint8Array(1_024).fill(i),
    }));
    const params = {
      sessionId,
      text: "look at these ".repeat(4_000),
      clientMessageId: "largest",
      attachments,
      display: "look at these",
      hidden: false,
      meta: {
        incognito: false,
        hidden: false,
        hitlResume: false,
        origin: "web",
        voiceInput: true,
        voiceDurationMs: 1_000,
        voiceLanguage: "en-US",
      },
    };
    const answer = await peer.call<{ queued: boolean; seq?: number }>("session.prompt", params);
    expect(answer.seq ?? answer.queued).toBeTruthy();
    await canary.check();
  });
});
