import { afterEach, describe, expect, it, vi } from "vitest";
import WebSocket from "ws";
import type { ConnectionState } from "../../src/client/connection-state.js";
import type { FollowUpdate } from "../../src/client/follow-cursor.js";
import { followSession } from "../../src/client/follow-session.js";
import { createClient, type SessionmuxClient } from "../../src/client/index.js";
import { createNodeClient } from "../../src/client/node.js";
import { ConnectionRefusedError } from "../../src/client/remote-errors.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
async function host(): Promise<TestHost> {
  const h = await startTestHost();
  cleanups.push(() => h.dispose());
  return h;
}
function track(client: SessionmuxClient): ConnectionState[] {
  cleanups.push(() => client.close());
  const seen: ConnectionState[] = [];
  const sub = client.state$.subscribe((s) => seen.push(s));
  cleanups.push(() => sub.unsubscribe());
  return seen;
}
const fast = { baseMs: 5, capMs: 20 };

describe("honest connection states against a real host", () => {
  it("a wrong path (HTTP 404 at upgrade) is the terminal rejected state; calls settle with not_found", async () => {
    const h = await host();
    const url = h.wsUrl.replace("/api/remote.mux", "/api/wrong.mux");
    const client = createNodeClient({ url, token: ADMIN_TOKEN, backoff: fast });
    const seen = track(client);
    const error = await client.list().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConnectionRefusedError);
    expect(error).toMatchObject({ code: "not_found", status: 404 });
    expect(seen.map((s) => s.name)).toEqual(["connecting", "rejected"]);
    await expect(client.list()).rejects.toMatchObject({ code: "not_found" });
    expect(seen.map((s) => s.name)).toEqual(["connecting", "rejected"]);
  });

  it("a browser-style client learns a refused token over HTTP, waits unauthorized, and resumes its follow after setToken", async () => {
    const h = await host();
    const admin = createNodeClient({ url: h.wsUrl, token: ADMIN_TOKEN });
    cleanups.push(() => admin.close());
    await admin.create({ sessionId: "tok" });

    const client = createClient({ url: h.wsUrl, token: "stale-token", WebSocket, backoff: fast });
    const seen = track(client);
    const updates: FollowUpdate[] = [];
    let failure: unknown;
    const sub = followSession(client, "tok").subscribe({
      next: (u) => updates.push(u),
      error: (e) => (failure = e),
    });
    cleanups.push(() => sub.unsubscribe());
    await vi.waitFor(() => expect(client.state).toEqual({ name: "unauthorized", status: 401 }));
    await expect(client.list()).rejects.toMatchObject({ code: "unauthorized", status: 401 });
    expect(seen.filter((s) => s.name === "connecting")).toHaveLength(1);

    client.setToken(ADMIN_TOKEN);
    await vi.waitFor(() => expect(updates.some((u) => u.kind === "caughtUp")).toBe(true));
    expect(client.state.name).toBe("open");
    expect(failure).toBeUndefined();
    const { seq } = await admin.call("session.rename", { sessionId: "tok", title: "after" });
    await vi.waitFor(() =>
      expect(updates.some((u) => u.kind === "events" && u.events.some((e) => e.seq === seq))).toBe(true),
    );
  });
});
