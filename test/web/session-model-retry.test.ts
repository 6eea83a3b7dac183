import { describe, expect, it, vi } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import type { FollowUpdate } from "../../src/client/index.js";
import type { ConsoleLink } from "../../web/src/console-link.js";
import type { SessionCache } from "../../web/src/session-cache.js";
import { SessionModel } from "../../web/src/session-model.js";
import { opensAfter, useRetryTimers } from "./retry-timers.js";

interface Opened {
  from: { afterSeq: number; epoch?: string };
  next: (update: FollowUpdate) => void;
  fail: (error: unknown) => void;
}

/**
 * A session model on fake timers over a scripted link: every follow stream it opens is recorded,
 * and the test ends each with the host's error or catches it up by hand.
 */
function scriptedModel() {
  const opened: Opened[] = [];
  const link = {
    // an empty log's tail, as `session.page` without a cursor answers it
    page: async () => ({ epoch: "e1", headSeq: 0, events: [], hasMore: false }),
    follow(_sessionId: string, from: Opened["from"], next: Opened["next"], fail: Opened["fail"]) {
      opened.push({ from, next, fail });
      return () => undefined;
    },
  } as unknown as ConsoleLink;
  const cache = {
    load: async () => undefined,
    save: async () => undefined,
    forget: async () => undefined,
  } as unknown as SessionCache;
  const model = new SessionModel("s1", link, cache, () => undefined);
  return { opened, model };
}

const refused = () => new SessionmuxError("persistence_failure", "the database is away");

useRetryTimers();

describe("console session model: following again after the host ended the stream", () => {
  it("waits 2 s, then twice as long while it keeps failing, and 2 s again after a stream caught up", async () => {
    const { opened, model } = scriptedModel();
    model.start();
    await vi.waitFor(() => expect(opened).toHaveLength(1));
    opened[0]!.fail(refused());
    expect(model.mode).toBe("stopped");
    await opensAfter(opened, 2_000);
    opened[1]!.fail(refused());
    await opensAfter(opened, 4_000);
    // this one succeeds: the wait starts over
    opened[2]!.next({ kind: "opened", epoch: "e1", headSeq: 0 } as FollowUpdate);
    opened[2]!.next({ kind: "caughtUp" } as FollowUpdate);
    expect(model.mode).toBe("live");
    expect(model.error).toBeUndefined();
    opened[2]!.fail(refused());
    expect(model.mode).toBe("stopped");
    await opensAfter(opened, 2_000);
    // each stream resumes from the epoch the model holds
    expect(opened.map((o) => o.from)).toEqual(Array(4).fill({ afterSeq: 0, epoch: "e1" }));
    model.dispose();
  });

  it("opens nothing more once disposed during a wait", async () => {
    const { opened, model } = scriptedModel();
    model.start();
    await vi.waitFor(() => expect(opened).toHaveLength(1));
    opened[0]!.fail(refused());
    model.dispose();
    await vi.advanceTimersByTimeAsync(120_000);
    expect(opened).toHaveLength(1);
  });

  it("a session the host no longer has is gone, and no stream is opened again", async () => {
    const { opened, model } = scriptedModel();
    model.start();
    await vi.waitFor(() => expect(opened).toHaveLength(1));
    opened[0]!.fail(new SessionmuxError("session_not_found", "no such session"));
    expect(model.mode).toBe("gone");
    await vi.advanceTimersByTimeAsync(120_000);
    expect(opened).toHaveLength(1);
  });
});
