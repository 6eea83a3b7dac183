import { once } from "node:events";
import { describe, expect, it } from "vitest";
import type { Principal } from "../../src/host/principal.js";
import { SessionListCache } from "../../src/transport/http/session-list-cache.js";
import { AttackHost, Canary, report } from "../support/attack-host.js";
import { ADMIN_TOKEN, ALICE_TOKEN } from "../support/host.js";
import { hostTeardown } from "../support/host-teardown.js";
import { MuxPeer } from "../support/mux-peer.js";
import { tempDir } from "../support/temp-dir.js";
import { spawnCliHost } from "../torture/cli-host.js";

const { peers, keep } = hostTeardown<AttackHost>();

describe("principals are token entries (docs/reliability.md, Limits)", () => {
  it.each([
    [["--token", "*=x"], /name/],
    [["--token", "admin=y"], /reserved/],
    [["--token", "alice=a", "--token", "alice=b"], /used twice/],
    [["--token", "alice=same", "--token", "bob=same"], /same secret/],
    [["--token", "other"], /more than one bare/],
  ])("a host with %j refuses to start and says why", async (extra, message) => {
    const dir = tempDir();
    try {
      await expect(spawnCliHost({ dbPath: dir.file("s.db"), token: "admin-secret", extra })).rejects.toThrow(
        message,
      );
    } finally {
      dir.remove();
    }
  });

  it("cached session lists are kept per name and rank: an admin's is never an ordinary principal's of that name", async () => {
    const cache = new SessionListCache({ onAnyCommit: () => () => {} });
    const admin: Principal = Object.freeze({ name: "same", admin: true });
    const other: Principal = Object.freeze({ name: "same", admin: false });
    await cache.get(admin, "k", async () => Buffer.from("admin's list"));
    const seen = await cache.get(other, "k", async () => Buffer.from("own list"));
    expect(seen.toString()).toBe("own list");
    // an app's own authenticate makes a new object per request: the same name and rank hit
    const again = await cache.get({ name: "same", admin: false }, "k", async () => Buffer.from("read again"));
    expect(again.toString()).toBe("own list");
    const adminAgain = await cache.get({ name: "same", admin: true }, "k", async () =>
      Buffer.from("read again"),
    );
    expect(adminAgain.toString()).toBe("admin's list");
  });
});

describe("per-principal limits against a real host", () => {
  it("sockets past the limit are closed 4429 too_many_connections; creations past the bucket rate_limited", async () => {
    const host = keep(
      await AttackHost.start([
        "--token",
        `alice=${ALICE_TOKEN}`,
        "--max-sockets-per-principal",
        "3",
        "--session-create-burst",
        "5",
        "--session-create-per-second",
        "1",
      ]),
    );
    const canary = await Canary.start(host);
    const measured = await host.measure(async () => {
      await canary.stream(40, 25);
      for (let i = 0; i < 3; i++) peers.push(await MuxPeer.connect(host.wsUrl, { token: ALICE_TOKEN }));
      const refused = MuxPeer.socket(host.wsUrl, { token: ALICE_TOKEN });
      refused.on("error", () => {});
      // taken and closed at once, so that a browser too can read why (§2)
      const [code] = (await once(refused, "close")) as [number];
      expect(code).toBe(4429);

      const alice = peers[0]!;
      for (let i = 0; i < 5; i++) await alice.call("session.create", {});
      const limited = await alice.callError("session.create", {});
      expect(limited.code).toBe("rate_limited");
      expect((limited.data as { retryAfterMs: number }).retryAfterMs).toBeGreaterThan(0);
      // The admin's own bucket and sockets are untouched.
      await canary.peer.call("session.create", {});
      return canary.check();
    });
    report("per-principal sockets and creations", measured);
    expect(measured.result).toBeGreaterThan(40);

    // A closed socket frees its slot.
    await peers.shift()!.disconnect();
    peers.push(await MuxPeer.connect(host.wsUrl, { token: ALICE_TOKEN }));
    await canary.dispose();
  });

  it("past its stored-data quota a principal's prompts and creates are storage_quota_exceeded, the admin's are not", async () => {
    const host = keep(
      await AttackHost.start([
        "--token",
        `alice=${ALICE_TOKEN}`,
        "--max-stored-bytes-per-principal",
        "12000",
      ]),
    );
    const canary = await Canary.start(host);
    const alice = await MuxPeer.connect(host.wsUrl, { token: ALICE_TOKEN });
    peers.push(alice);
    await alice.call("session.create", { sessionId: "a1" });
    const follow = alice.follow("a1");
    const text = "x".repeat(7000);
    await alice.call("session.prompt", { sessionId: "a1", text, clientMessageId: "m1" });
    // the message and the demo agent's echo: about 14 kB, over the quota once the turn ended
    await expect
      .poll(() => alice.events(follow).some((e) => e.type === "turn/end"), { timeout: 10_000 })
      .toBe(true);
    const headSeq = alice.lastSeq(follow);
    const usage = async (token: string) => {
      const res = await fetch(`${host.url}/v1/usage`, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
      return (await res.json()) as {
        principal: string;
        stored_bytes: number;
        max_stored_bytes: number | null;
      };
    };
    const before = await usage(ALICE_TOKEN);
    expect(before).toMatchObject({ principal: "alice", max_stored_bytes: 12_000 });
    for (const [method, params] of [
      ["session.prompt", { sessionId: "a1", text: "more", clientMessageId: "m2" }],
      ["session.create", { sessionId: "a2" }],
      ["session.fork", { sourceId: "a1", sessionId: "a1-fork" }],
    ] as const) {
      const refused = await alice.callError(method, params);
      expect(refused.code).toBe("storage_quota_exceeded");
      const data = refused.data as { maxBytes: number; storedBytes: number };
      expect(data.maxBytes).toBe(12_000);
      expect(data.storedBytes).toBeGreaterThan(14_000);
      expect(data.storedBytes).toBe(before.stored_bytes);
    }
    const upload = await fetch(`${host.url}/v1/attachments`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${ALICE_TOKEN}`,
        "content-type": "text/plain",
        "x-filename": "a.txt",
      },
      body: "more bytes",
    });
    expect(upload.status).toBe(413);
    const refusedUpload = (await upload.json()) as { error: string; max_bytes: number; stored_bytes: number };
    expect(refusedUpload.error).toBe("storage_quota_exceeded");
    expect(refusedUpload.max_bytes).toBe(12_000);
    expect(refusedUpload.stored_bytes).toBeGreaterThan(14_000);
    // nothing was appended; the admin's writes are not bound by alice's quota
    expect(
      (await canary.peer.call("session.page", { sessionId: "a1" })) as { headSeq: number },
    ).toMatchObject({
      headSeq,
    });
    await canary.peer.call("session.prompt", { sessionId: "a1", text, clientMessageId: "admin-1" });
    await canary.stream(10, 25);
    expect(await canary.check()).toBeGreaterThan(0);
    expect((await usage(ADMIN_TOKEN)).max_stored_bytes).toBeNull();
    // deleting the session makes room
    await alice.call("session.delete", { sessionId: "a1" });
    expect((await usage(ALICE_TOKEN)).stored_bytes).toBe(0);
    await alice.call("session.create", { sessionId: "a2" });
    await canary.dispose();
  });
});
