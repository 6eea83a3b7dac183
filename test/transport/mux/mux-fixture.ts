import { expect } from "vitest";
import type { NewEvent, SessionEvent } from "../../../protocol/index.js";
import type { HostOptions } from "../../../src/server.js";
import type { HostStore } from "../../../src/store/live-state-store.js";
import type { MuxOptionsInput } from "../../../src/transport/mux/mux-options.js";
import { asyncStore } from "../../support/async-store.js";
import { gate } from "../../support/gate.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { MuxPeer, type MuxPeerOptions } from "../../support/mux-peer.js";
import { until } from "../../support/until.js";
import { withMembers } from "../../support/with-members.js";

export function connect(host: TestHost, options: MuxPeerOptions = {}): Promise<MuxPeer> {
  return MuxPeer.connect(host.wsUrl, { token: ADMIN_TOKEN, ...options });
}

export async function createSession(peer: MuxPeer, params: Record<string, unknown> = {}): Promise<string> {
  const { header } = await peer.call<{ header: { sessionId: string } }>("session.create", params);
  return header.sessionId;
}

/** Appends `count` deltas straight to the log in batches of `batch` (fast, no agent involved). */
export async function appendDeltas(
  host: TestHost,
  sessionId: string,
  count: number,
  batch = 1000,
  text = "x",
): Promise<number> {
  let head = 0;
  for (let done = 0; done < count; done += batch) {
    const n = Math.min(batch, count - done);
    const events: NewEvent[] = Array.from({ length: n }, () => ({
      type: "assistant/delta",
      data: { turnId: "bulk", text },
    }));
    const outcome = await host.store.append(sessionId, events);
    if (outcome.status !== "appended") throw new Error(`append: ${outcome.status}`);
    head = outcome.events[outcome.events.length - 1]?.seq ?? head;
  }
  return head;
}

export async function headSeq(host: TestHost, sessionId: string): Promise<number> {
  const head = await host.store.header(sessionId);
  if (head.status !== "ok") throw new Error(head.status);
  return head.headSeq;
}

/** Exactly `from … to`, each once, in order. */
export function expectRange(events: readonly SessionEvent[], from: number, to: number): void {
  const seqs = events.map((e) => e.seq);
  expect(seqs.length).toBe(Math.max(0, to - from + 1));
  for (let i = 0; i < seqs.length; i++) {
    if (seqs[i] !== from + i) expect.fail(`event #${i} has seq ${seqs[i]}, expected ${from + i}`);
  }
}

/** A follower on `peer` that must keep receiving: used as the canary of bad-input tests. */
export async function openCanary(
  host: TestHost,
  peer: MuxPeer,
): Promise<{ id: number; sessionId: string; check(): Promise<void> }> {
  const sessionId = await createSession(peer);
  const id = peer.follow(sessionId);
  await peer.waitItem(id, (i) => i.kind === "caughtUp");
  return {
    id,
    sessionId,
    async check() {
      const head = await appendDeltas(host, sessionId, 1);
      await peer.waitSeq(id, head);
      expect(peer.terminal(id)).toBeUndefined();
      expectRange(peer.events(id), 1, head);
    },
  };
}

/**
 * The stores the follow and control suites run against: the embedded SQLite store as it is, and
 * the same store behind the asynchronous double (reads delayed and reordered around commits).
 */
export const STORE_VARIANTS: readonly { name: string; options: Partial<HostOptions> }[] = [
  { name: "sqlite store", options: {} },
  { name: "async store double", options: { storeView: (store) => asyncStore(store).store } },
];

/** An attachment of `bytes` bytes stored for the admin, straight in the store. */
export function attachmentOf(host: TestHost, bytes: number): Promise<string> {
  return host.store.putAttachment({
    owner: "admin",
    name: "big.bin",
    type: "application/octet-stream",
    bytes: new Uint8Array(bytes).fill(7),
  });
}

/**
 * Stores `bytes` for the admin and makes the upload `sessionId`'s by a prompt referencing it:
 * deleting the session then deletes its chunks. The upload's id.
 */
export async function sessionUpload(
  host: TestHost,
  peer: MuxPeer,
  sessionId: string,
  bytes: Uint8Array,
): Promise<string> {
  const attachmentId = await host.store.putAttachment({ owner: "admin", name: "a", type: "x/y", bytes });
  await peer.call("session.prompt", {
    sessionId,
    text: "see attached",
    clientMessageId: "m1",
    attachments: [{ name: "a", type: "x/y", attachmentId }],
  });
  return attachmentId;
}

/** Asks for the attachment and waits until over 1 MiB of its answer has gone out; the call's id. */
export async function attachmentUnderWay(
  host: TestHost,
  peer: MuxPeer,
  sessionId: string,
  attachmentId: string,
): Promise<number> {
  const id = peer.nextId();
  peer.send({
    type: "call",
    id,
    method: "session.attachment",
    params: { sessionId, attachmentId },
  });
  const bytesOut = async () => (await host.metrics.bytesOut.get()).values[0]?.value ?? 0;
  await until(async () => (await bytesOut()) > 1024 * 1024, 5_000, "the answer under way");
  return id;
}

/**
 * A host whose store's `list` waits until `listing.open()`: a `session.list` call holds its slot
 * for as long as the test wants.
 */
export async function startHostWithHeldList(
  mux: MuxOptionsInput,
): Promise<{ host: TestHost; listing: ReturnType<typeof gate> }> {
  const listing = gate();
  const host = await startTestHost({
    mux,
    storeView: (store: HostStore) =>
      withMembers(store, {
        list: async (...args: Parameters<HostStore["list"]>) => {
          await listing.promise;
          return store.list(...args);
        },
      }),
  });
  return { host, listing };
}
