import { describe, expect, it, vi } from "vitest";
import type { ControlMirror } from "../../src/client/control-mirror-reducer.js";
import type { FollowUpdate } from "../../src/client/follow-cursor.js";
import { createNodeClient } from "../../src/client/node.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { tempDir } from "../support/temp-dir.js";
import { freePort } from "./child-host.js";

const cleanups = cleanupsAfterEach();

describe("a graceful host restart (streams end with host_shutting_down)", () => {
  it("follow and control resume on the next host generation without an error", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const port = await freePort();
    const dbPath = dir.file("sessions.db");
    let host: TestHost = await startTestHost({ port, dbPath });
    cleanups.push(() => host.close());
    const client = createNodeClient({
      url: host.wsUrl,
      token: ADMIN_TOKEN,
      backoff: { baseMs: 20, capMs: 200 },
    });
    cleanups.push(() => client.close());
    await client.create({ sessionId: "g" });

    const updates: FollowUpdate[] = [];
    const mirrors: ControlMirror[] = [];
    const errors: unknown[] = [];
    const follow = client
      .follow("g")
      .subscribe({ next: (u) => updates.push(u), error: (e) => errors.push(e) });
    const control = client
      .control()
      .subscribe({ next: (m) => mirrors.push(m), error: (e) => errors.push(e) });
    cleanups.push(
      () => follow.unsubscribe(),
      () => control.unsubscribe(),
    );
    await vi.waitFor(() => expect(updates.some((u) => u.kind === "caughtUp")).toBe(true));
    await vi.waitFor(() => expect(mirrors.at(-1)?.generation).toBeDefined());
    const first = client.hello?.generation;

    await host.close();
    host = await startTestHost({ port, dbPath });
    await vi.waitFor(() => expect(client.hello?.generation).not.toBe(first), { timeout: 20_000 });
    await vi.waitFor(() => expect(mirrors.at(-1)).toMatchObject({ generationChanged: true, stale: false }), {
      timeout: 20_000,
    });
    const { seq } = await client.call("session.rename", { sessionId: "g", title: "after restart" });
    await vi.waitFor(
      () =>
        expect(updates.some((u) => u.kind === "events" && u.events.some((e) => e.seq === seq))).toBe(true),
      { timeout: 20_000 },
    );
    expect(errors).toEqual([]);
    const seqs = updates.flatMap((u) => (u.kind === "events" ? u.events.map((e) => e.seq) : []));
    expect(seqs).toEqual(Array.from({ length: seq }, (_, i) => i + 1));
  });
});
