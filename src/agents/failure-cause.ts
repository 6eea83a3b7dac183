import { APICallError, RetryError } from "ai";
import { cutUtf16 } from "../../protocol/utf16-cut.js";
import { AgentLimitError } from "./agent-limits.js";

/** How much of an endpoint's error body is kept in the turn's error. */
const MAX_BODY_CHARS = 500;
/** Causes followed down a chain (a fetch failure wraps a socket error wraps …). */
const MAX_CAUSES = 4;

/**
 * A failed turn's error text: what failed and why, down to the root cause, so the operator reads
 * "HTTP 500 from http://…/chat/completions: {"error":"boom"}" or "terminated: other side closed"
 * rather than a bare "failed".
 */
export function describeFailure(err: unknown): string {
  if (err instanceof AgentLimitError) return err.message;
  if (RetryError.isInstance(err)) {
    return `${describeFailure(err.lastError)} (after ${err.errors.length} attempts)`;
  }
  if (APICallError.isInstance(err)) {
    const status = err.statusCode;
    // a refusal names its status and body; a response that broke while read names the cause
    if (status === undefined || status < 400) return `model call failed: ${err.url}: ${withCauses(err)}`;
    const body = cutUtf16(err.responseBody?.trim() ?? "", MAX_BODY_CHARS);
    return `model call failed: HTTP ${status} from ${err.url}: ${body || withCauses(err)}`;
  }
  return `model call failed: ${withCauses(err)}`;
}

function withCauses(err: unknown): string {
  const parts: string[] = [];
  let current: unknown = err;
  for (let depth = 0; current !== undefined && current !== null && depth < MAX_CAUSES; depth++) {
    const text = current instanceof Error ? current.message || current.name : String(current);
    if (!parts.includes(text)) parts.push(text);
    current = current instanceof Error ? current.cause : undefined;
  }
  return parts.join(": ");
}
