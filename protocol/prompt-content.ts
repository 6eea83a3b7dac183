import type { SchemaViolation } from "./schema-error.js";
import { hasVisibleText } from "./visible-text.js";

/** The fields of `session.prompt` params the rule reads. */
interface PromptContent {
  text: string;
  attachments?: readonly { attachmentId?: string; url?: string; bytes?: Uint8Array }[];
}

/**
 * What makes a prompt something to send (§4): visible text or at least one attachment; an
 * attachment names at most one place its content is (of `attachmentId`, `url`, `bytes`: with two,
 * one was silently dropped), and an upload is attached once. A blank prompt would start a turn,
 * and take a transcript row, for nothing the agent or a reader could see.
 */
export function promptContentViolation(params: PromptContent): SchemaViolation | undefined {
  const attachments = params.attachments ?? [];
  if (attachments.length === 0 && !hasVisibleText(params.text)) {
    return {
      path: "/text",
      message:
        "must contain a visible character, not only whitespace or invisible characters, unless the prompt has attachments",
    };
  }
  const seen = new Map<string, number>();
  for (const [index, a] of attachments.entries()) {
    const sources = [a.attachmentId, a.url, a.bytes].filter((source) => source !== undefined).length;
    if (sources > 1) {
      return {
        path: `/attachments/${index}`,
        message: "give at most one of attachmentId, url or bytes: where the attachment's content is",
      };
    }
    if (a.attachmentId === undefined) continue;
    const first = seen.get(a.attachmentId);
    if (first !== undefined) {
      return {
        path: `/attachments/${index}/attachmentId`,
        message: `attachment ${a.attachmentId} is already attachment ${first} of this prompt`,
      };
    }
    seen.set(a.attachmentId, index);
  }
  return undefined;
}
