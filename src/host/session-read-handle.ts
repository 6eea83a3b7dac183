import type { SessionHeader } from "../../protocol/index.js";
import type {
  AttachmentBody,
  CommitListener,
  EncodedReadOutcome,
  ReadOutcome,
  SessionProjection,
  SessionStore,
} from "../store/session-store.js";
import { canSee, type Principal } from "./principal.js";
import { refusal } from "./store-outcomes.js";

type Ok<T> = Extract<T, { status: "ok" }>;

/**
 * What a transport may read of one session once the host has authorised it: handed out by
 * `HostApi.openRead`, so the transports never reach the store themselves and every refusing
 * outcome becomes its §7 error in one place (`store-outcomes.ts`).
 */
export class SessionReadHandle {
  readonly sessionId: string;
  /** The header and head as the authorisation read them: callers need not read them again. */
  readonly header: SessionHeader;
  readonly headSeq: number;
  readonly #store: SessionStore;

  constructor(store: SessionStore, sessionId: string, cold: { header: SessionHeader; headSeq: number }) {
    this.#store = store;
    this.sessionId = sessionId;
    this.header = cold.header;
    this.headSeq = cold.headSeq;
  }

  /** Commit notices of this session, from now on. */
  subscribe(listener: CommitListener): () => void {
    return this.#store.subscribe(this.sessionId, listener);
  }

  async readAfter(afterSeq: number, limit: number): Promise<Ok<ReadOutcome>> {
    const read = await this.#store.readAfter(this.sessionId, afterSeq, limit);
    if (read.status !== "ok") throw refusal(this.sessionId, read);
    return read;
  }

  async readAfterEncoded(
    afterSeq: number,
    limit: number,
    perArray: number,
    envelope?: Uint8Array,
  ): Promise<Ok<EncodedReadOutcome>> {
    const read = await this.#store.readAfterEncoded(this.sessionId, afterSeq, limit, perArray, envelope);
    if (read.status !== "ok") throw refusal(this.sessionId, read);
    return read;
  }

  async projection(): Promise<SessionProjection> {
    const projection = await this.#store.projection(this.sessionId);
    if (!projection) throw refusal(this.sessionId, await this.#missing());
    return projection;
  }

  async #missing(): Promise<{ status: "not_found" } | { status: "retired" }> {
    const head = await this.#store.header(this.sessionId);
    return head.status === "retired" ? head : { status: "not_found" };
  }
}

/** An upload as its owner (or the admin) may read it; anyone else's answers like a missing one. */
export async function visibleAttachment(
  store: SessionStore,
  principal: Principal,
  attachmentId: string,
): Promise<AttachmentBody | null> {
  const found = await store.attachmentInfo(attachmentId);
  return found && canSee(principal, found.owner)
    ? { ...found, chunks: () => store.attachmentChunks(attachmentId) }
    : null;
}
