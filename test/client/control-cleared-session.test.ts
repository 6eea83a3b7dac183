import { describe, expect, it, vi } from "vitest";
import type { ControlMirror } from "../../src/client/control-mirror-reducer.js";
import { useTestHost } from "../support/use-test-host.js";

const testHost = useTestHost();

describe("the control mirror's row of a session cleared while it is watched", () => {
  it("becomes the cleared session's row, as session.list says, not the old log's row with the higher seq", async () => {
    const { client } = testHost;
    const { header } = await client.create({});
    const sessionId = header.sessionId;
    let mirror: ControlMirror | undefined;
    const sub = client.control().subscribe({ next: (m) => (mirror = m) });
    try {
      await client.prompt({ sessionId, text: "hello there" });
      // the demo agent's turn ends: the row has a turn and a seq past the first events
      await vi.waitFor(
        () => expect(mirror?.projections[sessionId]).toMatchObject({ turnCount: 1, lastState: "completed" }),
        { timeout: 10_000 },
      );
      const before = mirror?.projections[sessionId]?.seq ?? 0;
      expect(before).toBeGreaterThan(1);

      await client.call("session.clear", { sessionId });
      const listed = (await client.list({})).sessions.find((s) => s.sessionId === sessionId);
      expect(listed).toMatchObject({ seq: 0, turnCount: 0, blank: true, lastState: "idle" });
      await vi.waitFor(() =>
        expect(mirror?.projections[sessionId]).toMatchObject({
          seq: 0,
          turnCount: 0,
          blank: true,
          lastState: "idle",
          lastPromptAt: null,
        }),
      );
      // and the new log's rows then climb from there
      await client.prompt({ sessionId, text: "again" });
      await vi.waitFor(
        () => expect(mirror?.projections[sessionId]).toMatchObject({ turnCount: 1, lastState: "completed" }),
        { timeout: 10_000 },
      );
      expect(mirror?.projections[sessionId]?.seq).toBe(
        (await client.list({})).sessions.find((s) => s.sessionId === sessionId)?.seq,
      );
    } finally {
      sub.unsubscribe();
    }
  });
});
