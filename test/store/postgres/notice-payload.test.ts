import { describe, expect, it } from "vitest";
import type { Interaction } from "../../../protocol/index.js";
import type { LiveStateNotice } from "../../../src/store/live-state-store.js";
import {
  changesOf,
  decodePayload,
  encodePayload,
  hintsOf,
} from "../../../src/store/postgres/pg-notice-payload.js";
import type { PgLiveNotice } from "../../../src/store/postgres/pg-write-batch.js";
import type { CommitNotice } from "../../../src/store/session-store.js";
import type { PendingNotice } from "../../../src/store/write-batch.js";

/**
 * The NOTIFY payload one committed batch sends other hosts: what each session's change was
 * (folded), the live-state hints, and how a listener reads a payload it cannot trust (a build of
 * another version, a cut or garbled text): as "re-read everything", which is always safe.
 */

const delta = (seq: number) => ({
  seq,
  at: 1,
  type: "assistant/delta" as const,
  data: { turnId: "t", text: "x" },
});
const pending = (sessionId: string, notice: CommitNotice): PendingNotice => ({
  sessionId,
  notice,
  projection: null,
});
const append = (sessionId: string, seqs: number[], epoch = "e1"): PendingNotice =>
  pending(sessionId, { kind: "append", epoch, events: seqs.map(delta) });

const live = (notice: LiveStateNotice, queueVersion?: number): PgLiveNotice =>
  queueVersion === undefined ? { notice } : { notice, queueVersion };
const interaction = { interactionId: "i1", sessionId: "s", turnId: "t" } as unknown as Interaction;

describe("changesOf folds a batch's notices", () => {
  it("into one append per run of a session's appends in one epoch, from its first seq to its last", () => {
    expect(changesOf([append("s", [3, 4]), append("s", [5]), append("s", [6, 7])])).toEqual([
      { sessionId: "s", kind: "append", epoch: "e1", fromSeq: 3, toSeq: 7 },
    ]);
  });

  it("keeping apart other sessions, other epochs, other kinds, and runs another session broke", () => {
    const changes = changesOf([
      append("a", [1]),
      append("b", [1, 2]),
      append("a", [2]),
      pending("a", { kind: "clear", epoch: "e2" }),
      append("a", [1], "e2"),
      append("a", [1], "e3"),
      pending("a", { kind: "meta" }),
      pending("c", { kind: "create", epoch: "c1", events: [delta(1)] }),
      pending("c", { kind: "create", epoch: "c1", events: [delta(2)] }),
      pending("d", { kind: "delete" }),
    ]);
    expect(changes).toEqual([
      { sessionId: "a", kind: "append", epoch: "e1", fromSeq: 1, toSeq: 1 },
      { sessionId: "b", kind: "append", epoch: "e1", fromSeq: 1, toSeq: 2 },
      { sessionId: "a", kind: "append", epoch: "e1", fromSeq: 2, toSeq: 2 },
      { sessionId: "a", kind: "clear", epoch: "e2", fromSeq: 0, toSeq: 0 },
      { sessionId: "a", kind: "append", epoch: "e2", fromSeq: 1, toSeq: 1 },
      { sessionId: "a", kind: "append", epoch: "e3", fromSeq: 1, toSeq: 1 },
      { sessionId: "a", kind: "meta", epoch: "", fromSeq: 0, toSeq: 0 },
      { sessionId: "c", kind: "create", epoch: "c1", fromSeq: 1, toSeq: 1 },
      { sessionId: "c", kind: "create", epoch: "c1", fromSeq: 2, toSeq: 2 },
      { sessionId: "d", kind: "delete", epoch: "", fromSeq: 0, toSeq: 0 },
    ]);
  });

  it("folds appends only: another kind of notice is a change of its own, even in the same epoch", () => {
    const created = pending("s", { kind: "create", epoch: "e1", events: [delta(2)] });
    expect(changesOf([append("s", [1]), created]).map((c) => c.kind)).toEqual(["append", "create"]);
  });

  it("an append of no events keeps the run's end where it was", () => {
    expect(changesOf([append("s", [3]), append("s", [])])).toEqual([
      { sessionId: "s", kind: "append", epoch: "e1", fromSeq: 3, toSeq: 3 },
    ]);
  });
});

describe("hintsOf", () => {
  it("gives one hint per live notice, an interaction once however many of its notices", () => {
    const hints = hintsOf([
      live({ kind: "queue", sessionId: "s", owner: "o", items: [] }, 4),
      live({ kind: "queue", sessionId: "s2", owner: "o", items: [] }),
      live({ kind: "interaction.requested", owner: "o", interaction }),
      live({
        kind: "interaction.resolved",
        owner: "o",
        sessionId: "s",
        interactionId: "i1",
        resolution: {} as never,
      }),
      live({ kind: "interaction.withdrawn", owner: "o", sessionId: "s", interactionId: "i2" }),
      live({ kind: "job.progress", owner: "o", sessionId: "s", jobId: "j", progress: 0.5 }),
      live({ kind: "lease", owner: "o", sessionId: "s", hostId: "h", generation: 3 }),
      live({ kind: "lease", owner: "o", sessionId: "s", hostId: null, generation: 4 }),
    ]);
    expect(hints).toEqual([
      { kind: "queue", sessionId: "s", version: 4 },
      { kind: "queue", sessionId: "s2", version: 0 },
      { kind: "interaction", interactionId: "i1" },
      { kind: "interaction", interactionId: "i2" },
      { kind: "job", sessionId: "s", owner: "o", jobId: "j", progress: 0.5 },
      { kind: "lease", sessionId: "s", owner: "o", hostId: "h", generation: 3 },
      { kind: "lease", sessionId: "s", owner: "o", hostId: null, generation: 4 },
    ]);
  });
});

describe("a payload read back", () => {
  it("gives what was encoded: the host, the folded changes and every kind of hint", () => {
    const notices = [append("s", [1, 2]), append("s", [3]), pending("t", { kind: "delete" })];
    const liveNotices = [
      live({ kind: "queue", sessionId: "s", owner: "o", items: [] }, 9),
      live({ kind: "interaction.withdrawn", owner: "o", sessionId: "s", interactionId: "i2" }),
      live({ kind: "job.progress", owner: "o", sessionId: "s", jobId: "j", progress: 1 }),
      live({ kind: "lease", owner: "o", sessionId: "s", hostId: null, generation: 2 }),
      live({ kind: "lease", owner: "o", sessionId: "s", hostId: "h", generation: 3 }),
    ];
    expect(decodePayload(encodePayload("host-a", notices, liveNotices))).toEqual({
      host: "host-a",
      changes: changesOf(notices),
      live: hintsOf(liveNotices),
    });
    expect(decodePayload(encodePayload("host-a", notices))).toEqual({
      host: "host-a",
      changes: changesOf(notices),
      live: [],
    });
  });

  it("marks a dismissal's `meta` change with a sixth element, which a plain `meta` and other kinds lack", () => {
    const notices = [
      pending("s", { kind: "meta", dismissal: true }),
      pending("s", { kind: "meta" }),
      append("s", [1]),
    ];
    const text = encodePayload("host-a", notices);
    expect(JSON.parse(text).c).toEqual([
      ["s", "meta", "", 0, 0, "d"],
      ["s", "meta", "", 0, 0],
      ["s", "append", "e1", 1, 1],
    ]);
    expect(decodePayload(text).changes).toEqual([
      { sessionId: "s", kind: "meta", epoch: "", fromSeq: 0, toSeq: 0, dismissal: true },
      { sessionId: "s", kind: "meta", epoch: "", fromSeq: 0, toSeq: 0 },
      { sessionId: "s", kind: "append", epoch: "e1", fromSeq: 1, toSeq: 1 },
    ]);
    // a sixth element it does not know, or on another kind, is read as if absent (a later build's)
    const read = (entry: unknown[]) => decodePayload(JSON.stringify({ h: "a", c: [entry] })).changes;
    expect(read(["s", "meta", "", 0, 0, "x"])).toEqual([
      { sessionId: "s", kind: "meta", epoch: "", fromSeq: 0, toSeq: 0 },
    ]);
    expect(read(["s", "append", "e", 1, 2, "d"])).toEqual([
      { sessionId: "s", kind: "append", epoch: "e", fromSeq: 1, toSeq: 2 },
    ]);
  });

  it("says whose a dismissal is and its state in a seventh and eighth element, read only on a dismissal", () => {
    const dismissal = (principal: string, dismissed: boolean): PendingNotice => ({
      ...pending("s", { kind: "meta", dismissal: true }),
      dismissal: { principal, dismissed },
    });
    const text = encodePayload("host-a", [dismissal("alice", true), dismissal("bob", false)]);
    expect(JSON.parse(text).c).toEqual([
      ["s", "meta", "", 0, 0, "d", "alice", 1],
      ["s", "meta", "", 0, 0, "d", "bob", 0],
    ]);
    const meta = { sessionId: "s", kind: "meta", epoch: "", fromSeq: 0, toSeq: 0 };
    expect(decodePayload(text).changes).toEqual([
      { ...meta, dismissal: true, principal: "alice", dismissed: true },
      { ...meta, dismissal: true, principal: "bob", dismissed: false },
    ]);
    const read = (entry: unknown[]) => decodePayload(JSON.stringify({ h: "a", c: [entry] })).changes;
    // a host of the previous build sends the mark alone: a dismissal of no one it can tell
    expect(read(["s", "meta", "", 0, 0, "d"])).toEqual([{ ...meta, dismissal: true }]);
    // a malformed name or state, or the pair without the mark, says nothing of whose it is
    expect(read(["s", "meta", "", 0, 0, "d", 7, 1])).toEqual([{ ...meta, dismissal: true }]);
    expect(read(["s", "meta", "", 0, 0, "d", "alice", true])).toEqual([{ ...meta, dismissal: true }]);
    expect(read(["s", "meta", "", 0, 0, "x", "alice", 1])).toEqual([meta]);
  });

  it("says 're-read everything' once the text would reach PostgreSQL's limit, measured in bytes", () => {
    // 7,000 bytes is the cut: ids of two-byte letters pass by their length, not by their bytes
    const wide = (n: number) => Array.from({ length: n }, (_, i) => append(`é${"é".repeat(40)}${i}`, [1]));
    const fitting = encodePayload("h", wide(40));
    expect(fitting.length).toBeLessThan(7_000);
    expect(Buffer.byteLength(fitting)).toBeLessThan(7_000);
    expect(decodePayload(fitting).changes).toHaveLength(40);
    const over = encodePayload("h", wide(70));
    expect(over.length).toBeLessThan(7_000);
    // other hosts, of this version or another, read it as written here
    expect(over).toBe('{"h":"h","c":"all","l":"all"}');
    // just under and at the cut
    const sized = (bytes: number) => {
      const base = encodePayload("h", [append("", [1])]);
      return encodePayload("h", [append("x".repeat(bytes - Buffer.byteLength(base)), [1])]);
    };
    expect(Buffer.byteLength(sized(6_999))).toBe(6_999);
    expect(decodePayload(sized(7_000)).changes).toBe("all");
  });

  it("reads anything malformed as 're-read everything', keeping the host when it can", () => {
    const all = (host: string) => ({ host, changes: "all", live: "all" });
    expect(decodePayload("not json")).toEqual(all(""));
    expect(decodePayload("")).toEqual(all(""));
    expect(decodePayload(JSON.stringify({ h: 5, c: [] }))).toEqual({ host: "", changes: [], live: [] });
    expect(decodePayload(JSON.stringify({ h: "a" }))).toEqual(all("a"));
    expect(decodePayload(JSON.stringify({ h: "a", c: "all", l: "all" }))).toEqual(all("a"));
    const good = ["s", "append", "e", 1, 2];
    expect(decodePayload(JSON.stringify({ h: "a", c: [good] })).changes).toEqual([
      { sessionId: "s", kind: "append", epoch: "e", fromSeq: 1, toSeq: 2 },
    ]);
    const bad: unknown[] = [
      "s",
      5,
      [5, "append", "e", 1, 2],
      ["s", 5, "e", 1, 2],
      ["s", "rename", "e", 1, 2],
      ["s", "append", 5, 1, 2],
      ["s", "append", "e", "1", 2],
      ["s", "append", "e", 1, "2"],
    ];
    for (const entry of bad) {
      expect(decodePayload(JSON.stringify({ h: "a", c: [good, entry], l: [] }))).toEqual(all("a"));
    }
    for (const kind of ["append", "create", "clear", "delete", "meta"]) {
      expect(decodePayload(JSON.stringify({ h: "a", c: [["s", kind, "", 0, 0]] })).changes).toHaveLength(1);
    }
  });

  it("reads live hints that are not as written as 're-read every live state', changes kept", () => {
    const withLive = (l: unknown) => decodePayload(JSON.stringify({ h: "a", c: [], l }));
    expect(withLive(undefined).live).toEqual([]);
    expect(withLive("x")).toEqual({ host: "a", changes: [], live: "all" });
    expect(withLive(5)).toEqual({ host: "a", changes: [], live: "all" });
    const good: unknown[] = [
      ["q", "s", 1],
      ["i", "i1"],
      ["j", "s", "o", "j", 0.5],
      ["l", "s", "o", "h", 1],
      ["l", "s", "o", null, 1],
    ];
    expect(withLive(good).live).toHaveLength(5);
    const bad: unknown[] = [
      "q",
      "ix",
      7,
      ["x", "s", 1],
      ["q", 1, 1],
      ["q", "s", "1"],
      ["i", 1],
      ["j", 1, "o", "j", 0.5],
      ["j", "s", 1, "j", 0.5],
      ["j", "s", "o", 1, 0.5],
      ["j", "s", "o", "j", "0.5"],
      ["l", 1, "o", "h", 1],
      ["l", "s", 1, "h", 1],
      ["l", "s", "o", 1, 1],
      ["l", "s", "o", "h", "1"],
    ];
    for (const entry of bad) expect(withLive([...good, entry]).live).toBe("all");
  });
});
