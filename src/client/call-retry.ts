import type { CallMethod } from "../../protocol/index.js";

/**
 * Calls that may be sent again after a carrier loss without risking a second effect: cold reads,
 * `session.prompt` (idempotent on its `clientMessageId`, §4), `session.respond` (repeating the
 * winning answer succeeds, §5) and `session.ack` (compare-and-clear). Everything else surfaces the
 * carrier error, because the first attempt may or may not have taken effect.
 */
const RESENDABLE: ReadonlySet<CallMethod> = new Set<CallMethod>([
  "session.list",
  "session.page",
  "session.search",
  "session.models",
  "session.attachment",
  "session.prompt",
  "session.respond",
  "session.ack",
]);

/** Whether `method` is resent automatically after the socket carrying it died. */
export function isResendable(method: CallMethod): boolean {
  return RESENDABLE.has(method);
}
