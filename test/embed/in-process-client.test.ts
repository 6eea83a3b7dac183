import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { firstValueFrom, type Observable } from "rxjs";
import { filter, scan } from "rxjs/operators";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SessionEvent, SessionmuxError } from "../../protocol/index.js";
import type { ControlMirror } from "../../src/client/control-mirror-reducer.js";
import { createNodeClient, type SessionmuxClient } from "../../src/client/node.js";
import { createSessionmux, type Sessionmux } from "../../src/index.js";
import { gc } from "../support/gc.js";
import { readmeExample } from "../support/readme-example.js";
import { tempDir } from "../support/temp-dir.js";
import { until } from "../support/until.js";

/**
 * Code in the host's process gets the SDK's client without a socket to a port
 * (`sessionmux.connect(principal)`), and meets the same rules a network client meets: the
 * activation policy, the mux limits, the principals' visibility.
 */

const MAX_STREAMS = 3;
const alice = { name: "alice", admin: false };
const dir = tempDir();
let sm: Sessionmux;
let server: Server;
let wsUrl: string;
const clients: SessionmuxClient[] = [];

beforeAll(async () => {
  sm = await createSessionmux({
    db: dir.file("sessions.db"),
    tokens: [
      { name: "alice", secret: "alice-secret", admin: false },
      { name: "bob", secret: "bob-secret", admin: false },
    ],
    mux: { maxStreamsPerSocket: MAX_STREAMS },
  });
  server = createServer();
  sm.attach(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  wsUrl = `ws://127.0.0.1:${(server.address() as AddressInfo).port}${sm.muxPath}`;
});
afterAll(async () => {
  for (const client of clients) await client.close();
  await sm?.close();
  server?.closeAllConnections();
  await new Promise<void>((resolve) => server?.close(() => resolve()) ?? resolve());
  dir.remove();
});

function inProcess(principal = alice): SessionmuxClient {
  const client = sm.connect(principal);
  clients.push(client);
  return client;
}

function overSocket(token: string): SessionmuxClient {
  const client = createNodeClient({ url: wsUrl, token });
  clients.push(client);
  return client;
}

/** The error a stream ends with, or undefined once it delivered its first item. */
function firstOutcome(stream: Observable<unknown>): Promise<SessionmuxError | "item"> {
  return new Promise((resolve) => {
    const sub = stream.subscribe({
      next: () => resolve("item"),
      error: (error: unknown) => resolve(error as SessionmuxError),
    });
    streams.push(() => sub.unsubscribe());
  });
}
const streams: (() => void)[] = [];

describe("an in-process client", () => {
  it("runs a whole turn: follow sees it to its end and control mirrors its approval and answer", async () => {
    const client = inProcess();
    const mirrors: ControlMirror[] = [];
    const control = client.control().subscribe((m) => mirrors.push(m));
    try {
      const { sessionId } = (await client.create({ title: "in process" })).header;
      const events = firstValueFrom(
        client.follow(sessionId).pipe(
          scan((all: SessionEvent[], u) => (u.kind === "events" ? [...all, ...u.events] : all), []),
          filter((all) => all.some((e) => e.type === "turn/end")),
        ),
      );
      await client.prompt({ sessionId, text: "/approve ship it" });
      const asked = await until(
        () => Object.values(mirrors.at(-1)?.interactions ?? {}).find((i) => i.sessionId === sessionId),
        15_000,
        "the approval in the control mirror",
      );
      expect(asked.kind).toBe("approval");
      await client.call("session.respond", {
        interactionId: asked.interactionId,
        response: { outcome: "approve" },
      });
      const log = await events;
      expect(log.map((e) => e.type)).toContain("interaction/resolved");
      const end = log.at(-1);
      expect(end?.type === "turn/end" && end.data.state).toBe("completed");
      await until(() => !mirrors.at(-1)?.interactions[asked.interactionId], 15_000, "the answer mirrored");
    } finally {
      control.unsubscribe();
    }
  });

  it("meets the same per-socket stream limit as a network client (too_many_streams)", async () => {
    const local = inProcess();
    const remote = overSocket("alice-secret");
    const { sessionId } = (await local.create({})).header;
    for (const client of [local, remote]) {
      const outcomes = [];
      for (let i = 0; i < MAX_STREAMS; i++)
        outcomes.push(await firstOutcome(client.open("session.follow", { sessionId })));
      expect(outcomes).toEqual(Array(MAX_STREAMS).fill("item"));
      const refused = await firstOutcome(client.open("session.follow", { sessionId }));
      expect(refused).toBeInstanceOf(SessionmuxError);
      expect((refused as SessionmuxError).code).toBe("too_many_streams");
    }
    for (const stop of streams.splice(0)) stop();
  });

  it("sees only its principal's sessions, as over a socket: another's is session_not_found", async () => {
    const bob = overSocket("bob-secret");
    const { sessionId } = (await bob.create({ title: "bob's" })).header;
    const local = inProcess();
    const refused = await local.page({ sessionId }).catch((error: unknown) => error);
    expect((refused as SessionmuxError).code).toBe("session_not_found");
    const followed = await firstOutcome(local.open("session.follow", { sessionId }));
    expect((followed as SessionmuxError).code).toBe("session_not_found");
    const prompted = await local.prompt({ sessionId, text: "mine now" }).catch((error: unknown) => error);
    expect((prompted as SessionmuxError).code).toBe("session_not_found");
    expect((await local.list({ limit: 200 })).sessions.map((r) => r.sessionId)).not.toContain(sessionId);
    // the same principal over a socket and in process share one view
    const own = (await local.create({})).header.sessionId;
    const aliceRemote = overSocket("alice-secret");
    expect((await aliceRemote.list({ limit: 200 })).sessions.map((r) => r.sessionId)).toContain(own);
    for (const stop of streams.splice(0)) stop();
  });

  it("is closed with the sessionmux, so none retries against a closed mux", async () => {
    const dir2 = tempDir();
    const other = await createSessionmux({
      db: dir2.file("s.db"),
      tokens: [{ name: "admin", secret: "s", admin: true }],
    });
    const client = other.connect({ name: "admin", admin: true });
    await client.list();
    await other.close();
    expect(client.state.name).toBe("closed");
    dir2.remove();
  });

  it("is let go by the sessionmux once closed, so a client per job does not pile up", async () => {
    const closed = await (async () => {
      const client = sm.connect(alice);
      await client.list();
      await client.close();
      return new WeakRef(client);
    })();
    // each round lets the closing socket's last callbacks run before a full collection
    for (let round = 0; round < 20 && closed.deref(); round++) {
      await new Promise((resolve) => setImmediate(resolve));
      gc();
    }
    expect(closed.deref()).toBeUndefined();
  });

  it("refuses a malformed principal before any connection exists", () => {
    expect(() => sm.connect({ name: "", admin: false })).toThrow(TypeError);
    expect(() => sm.connect({ name: "no spaces", admin: false })).toThrow(TypeError);
  });

  it("refuses a plain principal named admin, which would see every session the admin token created", async () => {
    expect(() => sm.connect({ name: "admin", admin: false })).toThrow(TypeError);
    expect(() => sm.connect({ name: "admin", admin: false })).toThrow(/reserved/);
    const { sessionId } = (await inProcess().create({ title: "alice's" })).header;
    const admin = inProcess({ name: "admin", admin: true });
    const admins = inProcess({ name: "admins", admin: false });
    expect((await admin.list({ limit: 200 })).sessions.map((r) => r.sessionId)).toContain(sessionId);
    expect((await admins.list({ limit: 200 })).sessions.map((r) => r.sessionId)).not.toContain(sessionId);
  });
});

describe("README", () => {
  it("runs the in-process example as written: the scheduler owns its session, its prompt stamped with its origin", async () => {
    const code = await readmeExample("### In-process callers");
    expect(code).toContain("mux.connect(");
    const AsyncFunction = (async () => {}).constructor as new (
      ...args: string[]
    ) => (mux: Sessionmux) => Promise<void>;
    await new AsyncFunction("mux", code)(sm);

    const admin = inProcess({ name: "admin", admin: true });
    const rows = (await admin.list()).sessions.filter((row) => row.title === "nightly report");
    expect(rows).toHaveLength(1);
    const page = await admin.page({ sessionId: rows[0]!.sessionId, afterSeq: 0 });
    const prompt = page.events.find((e) => e.type === "user/message");
    expect(prompt?.data).toMatchObject({ text: "Summarise yesterday", meta: { origin: "scheduler" } });
    expect(page.header.owner).toBe("scheduler");
  });
});
