import {
  type AttachmentShell,
  type EventDataOf,
  Limits,
  type UserMessageMeta,
} from "../../protocol/index.js";

export interface UserMessageAttachmentInput {
  name: string;
  type: string;
  attachmentId?: string;
  url?: string;
  bytes?: Uint8Array;
  size?: number;
  /** Present when an already-shaped shell is shaped again. */
  omittedBytes?: number;
}

export interface UserMessageInput {
  messageId: string;
  source: "user" | "server";
  text: string;
  display?: string;
  hidden?: boolean;
  interjection?: boolean;
  attachments?: UserMessageAttachmentInput[];
  meta?: Record<string, unknown>;
}

/**
 * What a stored `user/message` may hold (protocol-v1 §5): the text the transcript shows, capped;
 * attachment shells without bytes; only the metadata a transcript reads back. Applied again by
 * `append`, so an already-shaped message passes through unchanged and nothing unshaped is stored.
 */
export function shapeUserMessage(input: UserMessageInput): EventDataOf<"user/message"> {
  const hidden = input.hidden === true;
  const shown = typeof input.display === "string" ? input.display : input.text;
  const shaped: EventDataOf<"user/message"> = {
    messageId: String(input.messageId),
    source: input.source === "server" ? "server" : "user",
    text: hidden ? "" : capText(typeof shown === "string" ? shown : ""),
    attachments: Array.isArray(input.attachments) ? input.attachments.map(shapeAttachment) : [],
    meta: shapeMeta(input.meta),
  };
  if (hidden) shaped.hidden = true;
  if (input.interjection === true) shaped.interjection = true;
  return shaped;
}

function capText(text: string): string {
  if (text.length <= Limits.maxMessageChars) return text;
  let cut = text.slice(0, Limits.maxMessageChars);
  // never leave half of a surrogate pair behind
  const last = cut.charCodeAt(cut.length - 1);
  if (last >= 0xd800 && last <= 0xdbff) cut = cut.slice(0, -1);
  return cut;
}

function shapeAttachment(input: UserMessageAttachmentInput): AttachmentShell {
  const inline = input.bytes instanceof Uint8Array ? input.bytes.byteLength : undefined;
  const declared =
    typeof input.size === "number" && Number.isInteger(input.size) && input.size >= 0 ? input.size : 0;
  const shell: AttachmentShell = {
    name: String(input.name ?? ""),
    type: String(input.type ?? ""),
    size: inline ?? declared,
  };
  if (typeof input.attachmentId === "string") shell.attachmentId = input.attachmentId;
  if (typeof input.url === "string") shell.url = input.url;
  if (inline !== undefined) shell.omittedBytes = inline;
  else if (typeof input.omittedBytes === "number") shell.omittedBytes = input.omittedBytes;
  return shell;
}

function shapeMeta(meta: Record<string, unknown> | undefined): UserMessageMeta {
  const shaped: UserMessageMeta = {};
  if (meta === null || typeof meta !== "object") return shaped;
  if (typeof meta.incognito === "boolean") shaped.incognito = meta.incognito;
  if (typeof meta.hidden === "boolean") shaped.hidden = meta.hidden;
  if (typeof meta.hitlResume === "boolean") shaped.hitlResume = meta.hitlResume;
  if (typeof meta.origin === "string") shaped.origin = meta.origin;
  return shaped;
}
