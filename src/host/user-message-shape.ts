import { randomUUID } from "node:crypto";
import { type AttachmentShell, type EventDataOf, Limits, UserMessageMeta } from "../../protocol/index.js";
import { cutUtf16 } from "../../protocol/utf16-cut.js";
import type { PromptInput } from "./live/prompt-queue.js";

export interface UserMessageAttachmentInput {
  name: string;
  type: string;
  attachmentId?: string;
  url?: string;
  /** Bytes that came inline (raw or as a `data:` URL); recorded only as `omittedBytes`. */
  bytes?: Uint8Array;
  size?: number;
}

export interface UserMessageInput {
  messageId: string;
  source: "user" | "server";
  text: string;
  display?: string;
  hidden?: boolean;
  interjection?: boolean;
  attachments?: UserMessageAttachmentInput[];
  meta?: UserMessageMeta;
}

/**
 * The `user/message` a prompt becomes: a new message id, the prompt's text, display, hidden flag
 * and metadata, and `attachments` as `prepareAttachments` stored them.
 */
export function promptMessage(
  input: PromptInput,
  attachments: UserMessageAttachmentInput[],
  interjection = false,
): EventDataOf<"user/message"> {
  const message: UserMessageInput = {
    messageId: randomUUID(),
    source: "user",
    text: input.text,
    attachments,
  };
  if (input.display !== undefined) message.display = input.display;
  if (input.hidden !== undefined) message.hidden = input.hidden;
  if (input.meta !== undefined) message.meta = input.meta;
  if (interjection) message.interjection = true;
  return shapeUserMessage(message);
}

/**
 * What a stored `user/message` may hold (protocol-v1 §5): the text the transcript shows, capped;
 * attachment shells without bytes; only the metadata a transcript reads back. The host is its one
 * owner: it is the only place a prompt becomes an event, and the store (SQLite or PostgreSQL)
 * stores the typed event it is given, so no backend repeats the rule.
 */
export function shapeUserMessage(input: UserMessageInput): EventDataOf<"user/message"> {
  const hidden = input.hidden === true;
  const shown = input.display ?? input.text;
  const shaped: EventDataOf<"user/message"> = {
    messageId: input.messageId,
    source: input.source,
    text: hidden ? "" : capText(shown),
    attachments: (input.attachments ?? []).map(shapeAttachment),
    meta: shapeMeta(input.meta),
  };
  if (hidden) shaped.hidden = true;
  if (input.interjection === true) shaped.interjection = true;
  return shaped;
}

const capText = (text: string): string => cutUtf16(text, Limits.maxMessageChars);

/** A plain shell: inline bytes leave only their count behind. */
function shapeAttachment(input: UserMessageAttachmentInput): AttachmentShell {
  const inline = input.bytes?.byteLength;
  const shell: AttachmentShell = { name: input.name, type: input.type, size: inline ?? input.size ?? 0 };
  if (input.attachmentId !== undefined) shell.attachmentId = input.attachmentId;
  if (input.url !== undefined) shell.url = input.url;
  if (inline !== undefined) shell.omittedBytes = inline;
  return shell;
}

const META_KEYS = Object.keys(UserMessageMeta.properties) as (keyof UserMessageMeta)[];

/** Copies the whitelisted keys only; their values were checked against `UserMessageMeta` on the wire. */
function shapeMeta(meta: UserMessageMeta | undefined): UserMessageMeta {
  const shaped: Record<string, unknown> = {};
  if (meta === undefined) return shaped;
  for (const key of META_KEYS) if (meta[key] !== undefined) shaped[key] = meta[key];
  return shaped as UserMessageMeta;
}
