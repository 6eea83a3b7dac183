import type { NewEvent } from "../../protocol/index.js";
import type { DismissalStore } from "../../src/store/dismissals.js";
import { encodeValue } from "../../src/store/event-codec.js";
import type { LiveStateStore } from "../../src/store/live-state-store.js";
import type { SessionStore } from "../../src/store/session-store.js";
import { readWholeLog } from "../support/whole-log.js";

/** What the purge tests of both stores write: deltas, and messages (indexed for search). */
export const delta = (text: string): NewEvent => ({ type: "assistant/delta", data: { turnId: "t", text } });

export const message = (text: string, attachmentId?: string): NewEvent =>
  ({
    type: "user/message",
    data: {
      messageId: `m-${text.slice(0, 12)}`,
      source: "user",
      text,
      attachments: attachmentId
        ? [{ attachmentId, name: "f.bin", type: "application/octet-stream", size: 600_000 }]
        : [],
      meta: {},
    },
  }) as NewEvent;

/** A log of `events` events of about 300 bytes, an indexed message first in every `every`. */
export async function longLog(
  store: SessionStore,
  sessionId: string,
  events: number,
  every: number,
): Promise<void> {
  await store.create({ sessionId, owner: "o", model: "m" });
  for (let i = 0; i < events; i += every) {
    await store.append(sessionId, [
      message(`oldword${i} and more words of the old epoch`),
      ...Array.from({ length: every - 1 }, (_, j) => delta(`${i}-${j} `.repeat(50))),
    ]);
  }
}

/** The data bytes of the session's current log, as the owner's usage counts them. */
export async function storedBytes(store: SessionStore, sessionId: string): Promise<number> {
  const read = await readWholeLog(store, sessionId);
  if (read.status !== "ok") return 0;
  return read.events.reduce((sum, event) => sum + encodeValue(event.data).byteLength, 0);
}

/**
 * `turns` turns of the session (created if new), each a prompt recorded under the key
 * `<sessionId>-c<tag><i>` whose approval `<sessionId>-i<tag><i>` was answered before the turn ended.
 */
export async function answeredTurns(
  store: SessionStore & LiveStateStore,
  sessionId: string,
  turns: number,
  tag = "",
): Promise<void> {
  if ((await store.header(sessionId)).status !== "ok")
    await store.create({ sessionId, owner: "o", model: "m" });
  for (let i = 0; i < turns; i++) {
    const turnId = `${sessionId}-t${tag}${i}`;
    const interactionId = `${sessionId}-i${tag}${i}`;
    const prompt = { clientMessageId: `${sessionId}-c${tag}${i}`, record: { queued: false, turnId } };
    const asked = await store.append(
      sessionId,
      [
        { type: "turn/start", data: { turnId, trigger: "prompt" } },
        message(`prompt ${tag}${i}`),
        { type: "interaction/requested", data: { turnId, interactionId, kind: "approval", action: "x" } },
      ],
      { prompt },
    );
    if (asked.status !== "appended") throw new Error(asked.status);
    const answered = await store.resolveInteraction(interactionId, { outcome: "approve" });
    if (answered.status !== "resolved") throw new Error(answered.status);
    await store.append(sessionId, [{ type: "turn/end", data: { turnId, state: "completed" } }]);
  }
}

/**
 * A turn of the session (created if new) that starts `ended + 1` jobs and ends all but the last,
 * which keeps running, then ends; and a dismissal of the session by each of `principals`.
 */
export async function jobsAndDismissals(
  store: SessionStore & LiveStateStore & DismissalStore,
  sessionId: string,
  ended: number,
  principals: readonly string[],
): Promise<void> {
  if ((await store.header(sessionId)).status !== "ok")
    await store.create({ sessionId, owner: "o", model: "m" });
  const turnId = `${sessionId}-jobs`;
  const jobId = (i: number) => `${sessionId}-j${i}`;
  const appended = await store.append(sessionId, [
    { type: "turn/start", data: { turnId, trigger: "prompt" } },
    ...Array.from({ length: ended + 1 }, (_, i) => ({
      type: "job/started" as const,
      data: { jobId: jobId(i), label: "build", turnId },
    })),
    ...Array.from({ length: ended }, (_, i) => ({
      type: "job/ended" as const,
      data: { jobId: jobId(i), state: "completed" as const },
    })),
    { type: "turn/end", data: { turnId, state: "completed" } },
  ]);
  if (appended.status !== "appended") throw new Error(appended.status);
  for (const principal of principals) {
    const dismissed = await store.dismiss(sessionId, principal, 1);
    if (dismissed.status !== "ok") throw new Error(dismissed.status);
  }
}

/**
 * The sessions the purge-step tests take apart: "gone" (deleted) and "zcleared" (cleared, one event
 * in its new epoch), each with a log of 12 events, 3 answered turns, 3 ended jobs, 3 dismissals and
 * an attachment of 3 chunks its message names; beside them "kept" and "gone-too" (a name "gone"
 * starts), written the same way, live. A purge is taken in the order of its key: the delete's first.
 */
export async function writeLeftToPurge(store: SessionStore & LiveStateStore & DismissalStore): Promise<void> {
  for (const sessionId of ["gone", "kept", "gone-too", "zcleared"]) {
    await longLog(store, sessionId, 12, 4);
    await answeredTurns(store, sessionId, 3);
    await jobsAndDismissals(store, sessionId, 3, ["ann", "bob", "cy"]);
    const attachmentId = await store.putAttachment({
      owner: "o",
      name: "f.bin",
      type: "application/octet-stream",
      bytes: new Uint8Array(600_000).fill(7),
    });
    await store.append(sessionId, [message(`the file of ${sessionId}`, attachmentId)]);
  }
  const deleted = await store.delete("gone");
  if (deleted.status !== "deleted") throw new Error(deleted.status);
  const cleared = await store.clear("zcleared");
  if (cleared.status !== "cleared") throw new Error(cleared.status);
  await store.append("zcleared", [delta("the new epoch")]);
}
