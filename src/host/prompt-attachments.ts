import { type AttachmentInput, SessionmuxError } from "../../protocol/index.js";
import type { TurnAttachment } from "../agents/agent.js";
import type { AttachmentInfo, SessionStore } from "../store/session-store.js";
import type { PromptInput } from "./live/prompt-queue.js";
import type { UserMessageAttachmentInput } from "./user-message-shape.js";

export interface PreparedAttachments {
  /** What the stored `user/message` records (shaped by `promptMessage`: bytes become `omittedBytes`). */
  stored: UserMessageAttachmentInput[];
  /** What the agent receives, bytes included. */
  agent: TurnAttachment[];
  /** The inline bytes this preparation kept: no message references them until the prompt's append commits. */
  kept: string[];
}

/**
 * A prompt's attachments can be read: each upload it names exists and belongs to the session's
 * owner, each `data:` URL decodes. Checked when the prompt is accepted, so a prompt that could
 * never run is refused before it is queued or starts a turn, not accepted and failed when its
 * turn comes. Nothing is kept, no upload read: the answer is the bytes they would hand the agent,
 * counted as `prepareAttachments` counts them (inline ones as decoded, uploads at their rows' size).
 */
export async function assertAttachmentsReadable(
  store: SessionStore,
  owner: string,
  attachments: readonly AttachmentInput[] | undefined,
): Promise<number> {
  let total = 0;
  for (const [index, a] of (attachments ?? []).entries())
    total += sourceBytes(await sourceOf(store, owner, a, index));
  return total;
}

function uploadNotFound(attachmentId: string): SessionmuxError {
  return new SessionmuxError("attachment_not_found", `no attachment ${attachmentId}; upload it first`, {
    data: { attachmentId },
  });
}

/**
 * What `prepareAttachments` reads. `hold` is told the bytes the agent will receive (inline ones
 * and the uploads' stated sizes) before any upload is read, and may refuse them by throwing;
 * without `uploadBytes` no upload is read at all (a steered prompt's interjection records its
 * attachments, and its agent reads only its text).
 */
export interface PrepareOptions {
  hold?: (bytes: number) => void;
  /** @default true */
  uploadBytes?: boolean;
}

/**
 * §4 attachments: inline bytes, raw or as a `data:` URL, are kept in the attachment store (so the
 * transcript can link them) and leave a plain shell in the log; uploaded ones are looked up for
 * the agent; a link to elsewhere is kept as a link. Every upload is found and every `data:` URL
 * decoded before any inline bytes are kept: a refusal (an upload gone meanwhile, an undecodable
 * URL, bytes past `hold`) then leaves no bytes behind. A prompt whose append then does not commit
 * gives what was kept back with `discardKept`.
 */
export async function prepareAttachments(
  store: SessionStore,
  owner: string,
  input: PromptInput,
  options: PrepareOptions = {},
): Promise<PreparedAttachments> {
  const sources: AttachmentSource[] = [];
  for (const [index, a] of (input.attachments ?? []).entries())
    sources.push(await sourceOf(store, owner, a, index));
  options.hold?.(sources.reduce((sum, source) => sum + sourceBytes(source), 0));
  const uploaded =
    options.uploadBytes === false ? new Map<string, Uint8Array>() : await readUploads(store, owner, sources);
  const prepared: PreparedAttachments = { stored: [], agent: [], kept: [] };
  for (const source of sources) {
    const { name } = source.input;
    if (source.kind === "inline") {
      const { type, bytes } = source;
      let attachmentId: string;
      try {
        attachmentId = await store.putAttachment({ owner, name, type, bytes });
      } catch (err) {
        await discardKept(store, prepared);
        throw err;
      }
      prepared.kept.push(attachmentId);
      prepared.stored.push({ name, type, attachmentId, bytes });
      prepared.agent.push({ name, type, size: bytes.byteLength, bytes });
    } else if (source.kind === "upload") {
      const { type } = source.input;
      const { attachmentId, size } = source.upload;
      prepared.stored.push({ name, type, attachmentId, size });
      const bytes = uploaded.get(attachmentId);
      prepared.agent.push(bytes ? { name, type, size, bytes } : { name, type, size });
    } else {
      const { type, url } = source.input;
      const shell: UserMessageAttachmentInput = { name, type, size: 0 };
      if (url !== undefined) shell.url = url;
      prepared.stored.push(shell);
      prepared.agent.push(url !== undefined ? { name, type, size: 0, url } : { name, type, size: 0 });
    }
  }
  return prepared;
}

/** The bytes of the uploads a prompt names, each read once however often it is named. */
async function readUploads(
  store: SessionStore,
  owner: string,
  sources: readonly AttachmentSource[],
): Promise<Map<string, Uint8Array>> {
  const read = new Map<string, Uint8Array>();
  for (const source of sources) {
    if (source.kind !== "upload" || read.has(source.upload.attachmentId)) continue;
    const { attachmentId } = source.upload;
    const upload = await store.getAttachment(attachmentId);
    // deleted or expired since it was found
    if (!upload || upload.owner !== owner) throw uploadNotFound(attachmentId);
    read.set(attachmentId, upload.bytes);
  }
  return read;
}

/** The bytes one attachment hands its agent: inline ones as decoded, an upload at its stated size. */
function sourceBytes(source: AttachmentSource): number {
  if (source.kind === "inline") return source.bytes.byteLength;
  return source.kind === "upload" ? source.upload.size : 0;
}

/**
 * Deletes the inline bytes a prompt kept when its append did not commit (a duplicate that lost
 * the race, a lost lease, a refusal, a failed write): they would count on the owner's quota until
 * they expired. One a committed message references stays. A delete that fails leaves an
 * unreferenced row, which expires like an unused upload; the prompt's own error is what the
 * caller hears.
 */
export async function discardKept(store: SessionStore, prepared: PreparedAttachments): Promise<void> {
  for (const attachmentId of prepared.kept)
    await store.discardAttachment(attachmentId).catch(() => undefined);
}

/** Where one attachment's content comes from, found without reading an upload's bytes or keeping anything. */
type AttachmentSource =
  | { kind: "inline"; input: AttachmentInput; type: string; bytes: Uint8Array }
  | { kind: "upload"; input: AttachmentInput; upload: AttachmentInfo }
  | { kind: "link"; input: AttachmentInput };

async function sourceOf(
  store: SessionStore,
  owner: string,
  a: AttachmentInput,
  index: number,
): Promise<AttachmentSource> {
  const inline = a.bytes ? { type: a.type, bytes: a.bytes } : await decodeDataUrl(a, index);
  if (inline) return { kind: "inline", input: a, ...inline };
  if (a.attachmentId) {
    const upload = await store.attachmentInfo(a.attachmentId);
    if (!upload || upload.owner !== owner) throw uploadNotFound(a.attachmentId);
    return { kind: "upload", input: a, upload };
  }
  return { kind: "link", input: a };
}

/**
 * The bytes of a `data:` URL, decoded by the WHATWG data URL processor Node's `fetch` implements
 * (no network is involved for this scheme); its media type fills an empty `type`.
 */
async function decodeDataUrl(
  a: AttachmentInput,
  index: number,
): Promise<{ type: string; bytes: Uint8Array } | undefined> {
  const url = a.url === undefined ? undefined : URL.parse(a.url);
  if (url?.protocol !== "data:") return undefined;
  try {
    const response = await fetch(url);
    const bytes = new Uint8Array(await response.arrayBuffer());
    return { type: a.type || (response.headers.get("content-type") ?? ""), bytes };
  } catch {
    throw new SessionmuxError(
      "bad_request",
      "the attachment's data: URL cannot be decoded; send valid base64 or percent-encoded data",
      {
        data: { field: `/attachments/${index}/url` },
      },
    );
  }
}
