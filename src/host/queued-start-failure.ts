import {
  type ErrorCode,
  type EventDataOf,
  isRetryable,
  type NewEvent,
  SessionmuxError,
} from "../../protocol/index.js";
import type { PromptInput } from "./live/prompt-queue.js";
import { NotOwner } from "./not-owner.js";
import { promptMessage } from "./user-message-shape.js";

/**
 * Whether a queued prompt's start that failed so may work later: the store could not write (a
 * full disk), the principal's turns held its attachment room, the host lost the session or is
 * stopping, or any other refusal the §7 table calls retryable. Anything else (a refusal of the
 * prompt itself, a fault of the host's own code) fails the same way each time: tried again, it
 * held every later prompt of its session behind it for good.
 */
export function startMayRecover(err: unknown): boolean {
  if (err instanceof NotOwner) return true;
  return err instanceof SessionmuxError && isRetryable(err.code);
}

/** What a start that cannot recover records: the §7 code (`internal_error` for an untyped fault) and why. */
export function startFailure(err: unknown): { code: ErrorCode; error: string } {
  const code = err instanceof SessionmuxError ? err.code : "internal_error";
  const why = err instanceof Error ? err.message || err.name : String(err);
  return { code, error: `the queued prompt could not start (${code}): ${why}` };
}

/**
 * The turn a queued prompt that cannot start becomes, in one append: opened, its prompt recorded
 * (attachments as plain shells: nothing of theirs is read or kept, their reading may be what
 * failed), and ended `failed` with the failure's code. The reader sees the prompt and why it never
 * ran, and a retry of its `clientMessageId` answers this turn.
 */
export function failedStartEvents(
  turnId: string,
  input: PromptInput,
  failure: { code: ErrorCode; error: string },
): NewEvent[] {
  const shells = (input.attachments ?? []).map(({ name, type, url }) =>
    url === undefined ? { name, type } : { name, type, url },
  );
  const end: EventDataOf<"turn/end"> = { turnId, state: "failed", ...failure };
  return [
    { type: "turn/start", data: { turnId, trigger: "queue" } },
    { type: "user/message", data: promptMessage(input, shells) },
    { type: "turn/end", data: end },
  ];
}
