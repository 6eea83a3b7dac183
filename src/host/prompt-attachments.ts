import { type AttachmentInput, SessionmuxError } from "../../protocol/index.js";
import type { TurnAttachment } from "../agents/agent.js";
import type { SessionStore } from "../store/session-store.js";
import type { PromptInput } from "./live/prompt-queue.js";
import type { UserMessageAttachmentInput } from "./user-message-shape.js";

export interface PreparedAttachments {
  /** What the stored `user/message` records (shaped by `promptMessage`: bytes become `omittedBytes`). */
  stored: UserMessageAttachmentInput[];
  /** What the agent receives, bytes included. */
  agent: TurnAttachment[];
}

/**
 * §4 attachments: inline bytes, raw or as a `data:` URL, are kept in the attachment store (so the
 * transcript can link them) and leave a plain shell in the log; uploaded ones are looked up for
 * the agent; a link to elsewhere is kept as a link.
 */
export async function prepareAttachments(
  store: SessionStore,
  owner: string,
  input: PromptInput,
): Promise<PreparedAttachments> {
  const prepared: PreparedAttachments = { stored: [], agent: [] };
  const attachments = input.attachments ?? [];
  for (const [index, a] of attachments.entries()) {
    const inline = a.bytes ? { type: a.type, bytes: a.bytes } : await decodeDataUrl(a, index);
    if (inline) {
      const { type, bytes } = inline;
      const attachmentId = await store.putAttachment({ owner, name: a.name, type, bytes });
      prepared.stored.push({ name: a.name, type, attachmentId, bytes });
      prepared.agent.push({ name: a.name, type, size: bytes.byteLength, bytes });
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
