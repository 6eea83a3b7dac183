import { randomUUID } from "node:crypto";
import { type EventDataOf, SessionmuxError } from "../../protocol/index.js";
import type { TurnAttachment } from "../agents/agent.js";
import type { SessionStore } from "../store/session-store.js";
import { shapeUserMessage, type UserMessageAttachmentInput } from "../store/user-message-shape.js";
import type { PromptInput } from "./live/prompt-queue.js";

export interface PreparedAttachments {
  /** What the stored `user/message` records (shaped again by the store: bytes become `omittedBytes`). */
  stored: UserMessageAttachmentInput[];
  /** What the agent receives, bytes included. */
  agent: TurnAttachment[];
}

/**
 * §4 attachments: inline bytes are kept in the attachment store (so the transcript can link them),
 * uploaded ones are looked up for the agent; either way the log keeps only the shell.
 */
export async function prepareAttachments(
  store: SessionStore,
  owner: string,
  input: PromptInput,
): Promise<PreparedAttachments> {
  const prepared: PreparedAttachments = { stored: [], agent: [] };
  for (const a of input.attachments ?? []) {
    if (a.bytes) {
      const attachmentId = await store.putAttachment({ owner, name: a.name, type: a.type, bytes: a.bytes });
      prepared.stored.push({ name: a.name, type: a.type, attachmentId, bytes: a.bytes });
      prepared.agent.push({ name: a.name, type: a.type, size: a.bytes.byteLength, bytes: a.bytes });
    } else if (a.attachmentId) {
      const found = await store.getAttachment(a.attachmentId);
      if (!found || found.owner !== owner) {
        throw new SessionmuxError(
          "attachment_not_found",
          `no attachment ${a.attachmentId}; upload it first`,
          {
            data: { attachmentId: a.attachmentId },
          },
        );
      }
      prepared.stored.push({ name: a.name, type: a.type, attachmentId: a.attachmentId, size: found.size });
      prepared.agent.push({ name: a.name, type: a.type, size: found.size, bytes: found.bytes });
    } else {
      const shell: UserMessageAttachmentInput = { name: a.name, type: a.type, size: 0 };
      if (a.url !== undefined) shell.url = a.url;
      prepared.stored.push(shell);
      prepared.agent.push(
        a.url !== undefined
          ? { name: a.name, type: a.type, size: 0, url: a.url }
          : { name: a.name, type: a.type, size: 0 },
      );
    }
  }
  return prepared;
}

/**
 * A prompt as its stored `user/message` (an interjection when steered into a running turn) and
 * the attachments the agent receives.
 */
export async function preparePromptMessage(
  store: SessionStore,
  owner: string,
  input: PromptInput,
  interjection = false,
): Promise<{ message: EventDataOf<"user/message">; agent: TurnAttachment[] }> {
  const attachments = await prepareAttachments(store, owner, input);
  const message = shapeUserMessage({
    messageId: randomUUID(),
    source: "user",
    text: input.text,
    ...(interjection ? { interjection: true } : {}),
    ...(input.display !== undefined ? { display: input.display } : {}),
    ...(input.hidden !== undefined ? { hidden: input.hidden } : {}),
    attachments: attachments.stored,
  });
  return { message, agent: attachments.agent };
}
