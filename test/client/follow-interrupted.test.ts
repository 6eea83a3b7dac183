import type { Subscription } from "rxjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FollowUpdate } from "../../src/client/follow-cursor.js";
import { followSession } from "../../src/client/follow-session.js";
import { createNodeClient, type SessionmuxClient } from "../../src/client/node.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import { until } from "../support/until.js";

let host: TestHost;
let proxy: TcpProxy;
let client: SessionmuxClient;

beforeAll(async () => {
  host = await startTestHost();
  proxy = await startTcpProxy(host.port);
  client = createNodeClient({
    url: `ws://127.0.0.1:${proxy.port}/api/remote.mux`,
    token: ADMIN_TOKEN,
    backoff: { baseMs: 20, capMs: 100 },
  });
});
afterAll(async () => {
  await client?.close();
  await proxy?.stop();
  await host?.dispose();
});

describe("a follow's cursor while its socket is down", () => {
  it("stops claiming caughtUp the moment the socket is lost, and claims it again only after a new caughtUp", async () => {
    const { header } = await client.create({});
    const updates: FollowUpdate[] = [];
    /** The cursor the caller last saw, at each connection state the client reported. */
    const seenPerState: { state: string; caughtUp: boolean | undefined }[] = [];
    const last = (): FollowUpdate | undefined => updates.at(-1);
    const sub: Subscription = followSession(client, header.sessionId).subscribe({
      next: (u) => updates.push(u),
    });
    const states = client.state$.subscribe((s) =>
      seenPerState.push({ state: s.name, caughtUp: last()?.cursor.caughtUp }),
    );
    try {
      await until(() => last()?.cursor.caughtUp, 10_000, "first caughtUp");
      const before = updates.length;
      const seqBefore = last()?.cursor.seq;

      proxy.cutAll();
      await until(() => client.state.name !== "open", 10_000, "the client to notice the cut");
      // By the time the client leaves `open` the follow has already said it is interrupted.
      expect(seenPerState.at(-1)?.caughtUp).toBe(false);
      expect(updates.slice(before).map((u) => u.kind)).toEqual(["interrupted"]);
      expect(last()?.cursor).toMatchObject({ seq: seqBefore, caughtUp: false });

      await until(() => updates.length > before + 1 && last()?.cursor.caughtUp, 10_000, "caughtUp again");
      const after = updates.slice(before).map((u) => u.kind);
      expect(after[0]).toBe("interrupted");
      expect(after.at(-1)).toBe("caughtUp");
      // Each loss is reported once, however many reconnect attempts it takes.
      expect(after.filter((k) => k === "interrupted")).toHaveLength(1);
      // While the client was not open, no update it had emitted claimed caughtUp.
      const downClaims = seenPerState.filter((s, i) => i > 0 && s.state !== "open" && s.caughtUp === true);
      expect(downClaims).toEqual([]);
    } finally {
      states.unsubscribe();
      sub.unsubscribe();
    }
  });
});
