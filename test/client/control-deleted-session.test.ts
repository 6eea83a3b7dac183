import { describe, expect, it, vi } from "vitest";
import type { ControlMirror } from "../../src/client/control-mirror-reducer.js";
import { createNodeClient } from "../../src/client/node.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { ALICE_TOKEN } from "../support/host.js";
import { useTestHost } from "../support/use-test-host.js";

const testHost = useTestHost();
const cleanups = cleanupsAfterEach();

describe("the control mirror's row of a session deleted while it is watched", () => {
  it("is dropped, as session.list drops it, whichever of the principal's sockets deleted it", async () => {
    const watcher = createNodeClient({ url: testHost.host.wsUrl, token: ALICE_TOKEN });
    const otherTab = createNodeClient({ url: testHost.host.wsUrl, token: ALICE_TOKEN });
    cleanups.push(
      () => watcher.close(),
      () => otherTab.close(),
    );
    const sessionId = (await watcher.create({})).header.sessionId;
    let mirror: ControlMirror | undefined;
    const sub = watcher.control().subscribe({ next: (m) => (mirror = m) });
    cleanups.push(() => sub.unsubscribe());
    await watcher.prompt({ sessionId, text: "hello there" });
    await vi.waitFor(
      () => expect(mirror?.projections[sessionId]).toMatchObject({ turnCount: 1, lastState: "completed" }),
      { timeout: 10_000 },
    );

    await otherTab.call("session.delete", { sessionId });
    expect((await otherTab.list({})).sessions.map((s) => s.sessionId)).not.toContain(sessionId);
    await vi.waitFor(() => expect(mirror?.projections[sessionId]).toBeUndefined());
    expect(mirror?.lastChange).toEqual({ kind: "removed", sessionId });
    // the rest of the mirror goes on: live, and a later change of another session applied
    const other = (await otherTab.create({})).header.sessionId;
    await otherTab.call("session.rename", { sessionId: other, title: "after the delete" });
    await vi.waitFor(() => expect(mirror?.projections[other]?.title).toBe("after the delete"));
    expect(mirror?.projections[sessionId]).toBeUndefined();
    expect(mirror?.stale).toBe(false);
    expect(mirror?.agents[sessionId]).toBeUndefined();
  });
});
