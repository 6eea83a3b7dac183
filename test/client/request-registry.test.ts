import { describe, expect, it } from "vitest";
import { RemoteError, RemoteStreamCarrierError } from "../../src/client/remote-errors.js";
import { RequestRegistry } from "../../src/client/request-registry.js";

const wireError = {
  code: "session_not_found",
  message: "no such session",
  category: "business",
  retryable: false,
} as const;

function recorder() {
  const log: unknown[] = [];
  return {
    log,
    call: { resolve: (v: unknown) => log.push(["result", v]), reject: (e: Error) => log.push(["reject", e]) },
    sink: {
      item: (v: unknown) => log.push(["item", v]),
      end: () => log.push(["end"]),
      error: (e: Error) => log.push(["error", e]),
    },
  };
}

describe("request registry", () => {
  it("routes a result to its call once, then forgets the id", () => {
    const r = new RequestRegistry();
    const rec = recorder();
    r.addCall(1, rec.call);
    expect(r.deliver({ type: "result", id: 1, value: { ok: 1 } })).toBe(true);
    expect(r.deliver({ type: "result", id: 1, value: { ok: 2 } })).toBe(false);
    expect(rec.log).toEqual([["result", { ok: 1 }]]);
  });

  it("routes items then end to a stream", () => {
    const r = new RequestRegistry();
    const rec = recorder();
    r.addStream(7, rec.sink);
    expect(r.deliver({ type: "item", id: 7, value: 1 })).toBe(true);
    expect(r.deliver({ type: "item", id: 7, value: 2 })).toBe(true);
    expect(r.deliver({ type: "end", id: 7 })).toBe(true);
    expect(r.deliver({ type: "end", id: 7 })).toBe(false);
    expect(rec.log).toEqual([["item", 1], ["item", 2], ["end"]]);
    expect(r.deliver({ type: "item", id: 7, value: 3 })).toBe(false);
  });

  it("turns an error frame into a terminal RemoteError with code and category", () => {
    const r = new RequestRegistry();
    const rec = recorder();
    r.addCall(2, rec.call);
    r.deliver({ type: "error", id: 2, error: wireError });
    const [kind, error] = rec.log[0] as [string, RemoteError];
    expect(kind).toBe("reject");
    expect(error).toBeInstanceOf(RemoteError);
    expect(error.code).toBe("session_not_found");
    expect(error.category).toBe("business");
    expect(error.terminal).toBe(true);
  });

  it("maps an unknown code from a newer host to internal_error", () => {
    const r = new RequestRegistry();
    const rec = recorder();
    r.addStream(3, rec.sink);
    r.deliver({
      type: "error",
      id: 3,
      error: { ...wireError, code: "from_the_future", category: "internal" },
    });
    expect((rec.log[0] as [string, RemoteError])[1].code).toBe("internal_error");
  });

  it("ignores an error frame without id and frames for removed streams", () => {
    const r = new RequestRegistry();
    const rec = recorder();
    r.addStream(4, rec.sink);
    expect(
      r.deliver({ type: "error", error: { ...wireError, code: "bad_frame", category: "protocol" } }),
    ).toBe(false);
    expect(r.removeStream(4)).toBe(true);
    expect(r.removeStream(4)).toBe(false);
    expect(r.deliver({ type: "item", id: 4, value: 1 })).toBe(false);
    expect(rec.log).toEqual([]);
  });

  it("fails everything in flight with the carrier error, and later registrations too", () => {
    const r = new RequestRegistry();
    const rec = recorder();
    r.addCall(1, rec.call);
    r.addStream(2, rec.sink);
    const lost = new RemoteStreamCarrierError("socket_lost");
    r.failAll(lost);
    r.addCall(3, rec.call);
    r.addStream(4, rec.sink);
    // a second failure does not replace the first for later registrations
    r.failAll(new RemoteStreamCarrierError("client_closed"));
    r.addCall(5, rec.call);
    expect(rec.log).toEqual([
      ["reject", lost],
      ["error", lost],
      ["reject", lost],
      ["error", lost],
      ["reject", lost],
    ]);
    // nothing is left to answer
    expect(r.deliver({ type: "result", id: 1, value: null })).toBe(false);
    expect(r.deliver({ type: "end", id: 2 })).toBe(false);
  });

  it("fails the one call or stream with an id (an answer that could not be read), and says whether there was one", () => {
    const r = new RequestRegistry();
    const rec = recorder();
    r.addCall(1, rec.call);
    r.addStream(2, rec.sink);
    r.addCall(3, rec.call);
    const unreadable = new Error("unreadable answer");
    expect(r.fail(1, unreadable)).toBe(true);
    expect(r.fail(1, unreadable)).toBe(false);
    expect(r.fail(2, unreadable)).toBe(true);
    expect(r.fail(2, unreadable)).toBe(false);
    expect(r.fail(9, unreadable)).toBe(false);
    expect(rec.log).toEqual([
      ["reject", unreadable],
      ["error", unreadable],
    ]);
    // the others are untouched and still answered
    expect(r.deliver({ type: "result", id: 3, value: 7 })).toBe(true);
    expect(r.deliver({ type: "item", id: 2, value: 1 })).toBe(false);
    expect(rec.log.at(-1)).toEqual(["result", 7]);
  });
  it("says an error frame was taken by its call or stream, and not by an id it does not know", () => {
    const r = new RequestRegistry();
    const rec = recorder();
    r.addCall(1, rec.call);
    r.addStream(2, rec.sink);
    expect(r.deliver({ type: "error", id: 1, error: wireError })).toBe(true);
    expect(r.deliver({ type: "error", id: 2, error: wireError })).toBe(true);
    // both entries are gone once failed
    expect(r.deliver({ type: "error", id: 1, error: wireError })).toBe(false);
    expect(r.deliver({ type: "error", id: 2, error: wireError })).toBe(false);
    expect(r.deliver({ type: "error", id: 9, error: wireError })).toBe(false);
    expect(rec.log.map((entry) => (entry as [string])[0])).toEqual(["reject", "error"]);
    const streamError = (rec.log[1] as [string, RemoteError])[1];
    expect(streamError).toBeInstanceOf(RemoteError);
    expect(streamError.code).toBe("session_not_found");
  });

  it("takes no hello or event frame, even one that shares a number with an entry", () => {
    const r = new RequestRegistry();
    const rec = recorder();
    r.addCall(1, rec.call);
    r.addStream(2, rec.sink);
    expect(r.deliver({ type: "hello", protocol: 1, hostId: "h", generation: "g", serverTime: 0 })).toBe(
      false,
    );
    expect(r.deliver({ type: "event", name: "session.removed", value: { sessionId: "s" } })).toBe(false);
    expect(rec.log).toEqual([]);
    // the entries are still in flight
    expect(r.deliver({ type: "result", id: 1, value: 1 })).toBe(true);
    expect(r.deliver({ type: "end", id: 2 })).toBe(true);
  });
});
