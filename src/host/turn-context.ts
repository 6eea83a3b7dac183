import { randomUUID } from "node:crypto";
import { type NewEvent, type Resolution, type SessionEvent, SessionmuxError } from "../../protocol/index.js";
import type {
  AgentEmit,
  InteractionRequest,
  JobHandle,
  TurnAttachment,
  TurnContext,
} from "../agents/agent.js";
import { readReachedHead } from "../store/read-head.js";
import type { AppendOptions, SessionStore } from "../store/session-store.js";
import { committedAnyway } from "./committed-anyway.js";
import type { Ownership } from "./host-leases.js";
import type { LiveRegistry } from "./live/live-registry.js";
import { queuedText } from "./live/prompt-queue.js";
import { type LiveSession, type RunningTurn, TurnEnded, TurnStopped } from "./live-session.js";
import { discardKept, prepareAttachments } from "./prompt-attachments.js";
import { refusal } from "./store-outcomes.js";
import { isStoreFailure } from "./store-retry.js";
import { promptMessage } from "./user-message-shape.js";

/** History is read in pages of this many events. */
const HISTORY_PAGE = 1000;
/** Events per backward page: the size of a `session.page`. */
const HISTORY_PAGE_BEFORE = 500;

/** The agent's handle on one running turn: every write goes to the log, every wait honours the abort. */
export class HostTurnContext implements TurnContext {
  readonly sessionId: string;
  readonly turnId: string;
  readonly model: string;
  readonly prompt: { text: string; attachments: TurnAttachment[] };
  readonly signal: AbortSignal;
  readonly #store: SessionStore;
  readonly #live: LiveRegistry;
  readonly #ownership: Ownership;
  readonly #turn: RunningTurn;
  readonly #session: LiveSession;
  readonly #owner: string;
  readonly #now: () => number;
  readonly #maxHistoryBytes: number;

  constructor(deps: {
    store: SessionStore;
    live: LiveRegistry;
    ownership: Ownership;
    session: LiveSession;
    turn: RunningTurn;
    prompt: { text: string; attachments: TurnAttachment[] };
    now: () => number;
    /** Stored event data `history()` returns at most (see `SessionHostOptions.maxTranscriptBytes`). */
    maxHistoryBytes: number;
  }) {
    this.sessionId = deps.session.sessionId;
    this.turnId = deps.turn.turnId;
    this.model = deps.session.model;
    this.prompt = deps.prompt;
    this.signal = deps.turn.abort.signal;
    this.#store = deps.store;
    this.#live = deps.live;
    this.#ownership = deps.ownership;
    this.#turn = deps.turn;
    this.#session = deps.session;
    this.#owner = deps.session.owner;
    this.#now = deps.now;
    this.#maxHistoryBytes = deps.maxHistoryBytes;
  }

  async history(): Promise<SessionEvent[]> {
    const events: SessionEvent[] = [];
    let dataBytes = 0;
    for (;;) {
      const outcome = await this.#store.readAfter(this.sessionId, events.at(-1)?.seq ?? 0, HISTORY_PAGE);
      if (outcome.status !== "ok") throw refusal(this.sessionId, outcome);
      // the owner may grow its log up to its storage quota (1 GiB): an agent holds at most this much
      dataBytes += outcome.dataBytes;
      if (dataBytes > this.#maxHistoryBytes) {
        const maxDataBytes = this.#maxHistoryBytes;
        throw new SessionmuxError(
          "transcript_too_large",
          `the session holds more than ${maxDataBytes} bytes of event data, more than turn.history() returns; read it back from its head with turn.historyPage()`,
          { data: { sessionId: this.sessionId, maxDataBytes } },
        );
      }
      events.push(...outcome.events);
      if (readReachedHead(outcome)) return events;
      // a long history delays the host's other work by one read, not by all of them
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  async historyPage(beforeSeq?: number): Promise<{ events: SessionEvent[]; hasMore: boolean }> {
    const query =
      beforeSeq === undefined ? { limit: HISTORY_PAGE_BEFORE } : { beforeSeq, limit: HISTORY_PAGE_BEFORE };
    const outcome = await this.#store.page(this.sessionId, query);
    if (outcome.status !== "ok") throw refusal(this.sessionId, outcome);
    // the same decoded rows `readAfter` returns; the page's wire schema types them loosely
    return { events: outcome.events as SessionEvent[], hasMore: outcome.hasMore };
  }

  async emit(event: AgentEmit): Promise<void> {
    const { type, ...rest } = event;
    await this.#append({ type, data: { turnId: this.turnId, ...rest } } as NewEvent);
  }

  async requestInteraction(request: InteractionRequest): Promise<Resolution> {
    this.signal.throwIfAborted();
    const interactionId = randomUUID();
    const waiters = this.#live.interactionRegistry;
    // waited for before the commit, so an answer can never find nobody waiting once it is visible
    const answered = waiters.wait(interactionId);
    this.#turn.waiting++;
    try {
      await this.#append({
        type: "interaction/requested",
        data: { turnId: this.turnId, interactionId, ...request },
      });
      return await untilAborted(answered, this.signal);
    } catch (err) {
      waiters.abandon(interactionId);
      throw err;
    } finally {
      this.#turn.waiting--;
    }
  }

  async takeInterjections(): Promise<string[]> {
    const taken: string[] = [];
    for (const itemId of this.#turn.takeSteered()) {
      // removed or edited since it was steered: what is queued now is what the agent reads
      const item = this.#live.promptQueue.find(this.sessionId, itemId);
      if (!item) continue;
      // the agent reads an interjection's text alone: its uploads are recorded, never read
      const attachments = await prepareAttachments(this.#store, this.#owner, item.input, {
        uploadBytes: false,
      });
      const message = promptMessage(item.input, attachments.stored, true);
      // the interjection and the item's removal commit together
      const outcome = await this.#fencedAppend([{ type: "user/message", data: message }], {
        at: this.#now(),
        dequeue: { itemId, turnId: this.turnId, read: queuedText(item.input) },
      }).catch(async (err: unknown) => {
        // committed though its answer was lost: the log shows it taken and the queue no longer
        // holds it, so the agent must read it now or nobody ever does
        const { messageId } = message;
        const found =
          isStoreFailure(err) &&
          (await committedAnyway(
            this.#store,
            this.sessionId,
            (e) => e.type === "user/message" && e.data.messageId === messageId,
            1,
          ));
        if (found) return { status: "appended" as const };
        await discardKept(this.#store, attachments);
        throw err;
      });
      if (outcome.status === "appended") taken.push(item.input.text);
      else await discardKept(this.#store, attachments);
    }
    return taken;
  }

  startJob(label: string): JobHandle {
    // a job started during the turn may outlive it; one started after would begin after its end
    if (this.#turn.agentReturned) throw new TurnEnded(this.turnId);
    // a detached session (deleted, its lease lost) forgot its jobs: one started by its stopped
    // turn as it unwinds would run unended, holding a place of its session's and owner's bounds
    if (this.#session.detached)
      throw this.signal.reason instanceof Error ? this.signal.reason : new TurnEnded(this.turnId);
    return this.#live.jobRegistry.start(this.sessionId, this.#owner, this.turnId, label);
  }

  async #append(event: NewEvent, at = this.#now()): Promise<void> {
    this.signal.throwIfAborted();
    const outcome = await this.#fencedAppend([event], { at });
    if (outcome.status === "appended") return;
    throw refusal(this.sessionId, outcome);
  }

  /**
   * Appends under this host's lease of the session, while the agent has not returned. Once the
   * lease is gone nothing is written: the turn is stopped as `lost` and the agent's wait ends with
   * that reason.
   */
  async #fencedAppend<O extends Omit<AppendOptions, "fence">>(events: NewEvent[], options: O) {
    // an agent that kept its context past its return (a callback, a job) would write after the
    // turn's end: an interaction asked so would stay pending on a closed turn, and a restart would
    // park the session behind it
    if (this.#turn.agentReturned) throw new TurnEnded(this.turnId);
    const fence = this.#ownership.fence(this.sessionId);
    if (!fence) throw this.#lost();
    const outcome = await this.#store.append(this.sessionId, events, { ...options, ...fence });
    if (outcome.status === "fenced") {
      if (fence.fence) this.#ownership.fenced(fence.fence);
      throw this.#lost();
    }
    return outcome;
  }

  #lost(): Error {
    this.#turn.stop("lost");
    return this.signal.reason instanceof Error ? this.signal.reason : new TurnStopped("lost");
  }
}

/** Resolves with the promise or rejects with the abort reason, whichever comes first. */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}
