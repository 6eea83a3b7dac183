import type { EventType, Resolution, SessionEvent, TurnEndState } from "./events.js";
import type {
  AssistantTranscriptMessage,
  InteractionBlock,
  PendingInteraction,
  Segment,
  ToolCall,
  TranscriptJob,
  TranscriptState,
  TranscriptTurn,
} from "./transcript-model.js";

export * from "./transcript-model.js";

/**
 * The one transcript reducer (§5 events → what a person reads). The HTTP views, the SDK and the
 * console all fold events through `applyEvents`, so a transcript rebuilt from history and one
 * watched live cannot differ: feeding events one at a time or all at once gives equal states.
 * Pure and browser-safe: it imports only from `protocol/`.
 */

export function applyEvent(state: TranscriptState, event: SessionEvent): TranscriptState {
  return applyEvents(state, [event]);
}

/**
 * Folds `events` (ascending seq) into `state` without mutating it. Copy-on-write: the arrays and
 * the messages a batch touches are copied once per batch, not once per event, so replaying a
 * long log costs about as much as one pass over it.
 */
export function applyEvents(state: TranscriptState, events: readonly SessionEvent[]): TranscriptState {
  let draft: Draft | undefined;
  for (const event of events) {
    if (event.seq <= (draft?.s.lastSeq ?? state.lastSeq)) continue;
    draft ??= new Draft(state);
    draft.s.lastSeq = event.seq;
    // an event type from a newer host is skipped, not a reason to stop reading
    if (Object.hasOwn(handlers, event.type)) (handlers[event.type] as Handler<EventType>)(draft, event);
  }
  return draft ? draft.s : state;
}

type EventOf<T extends EventType> = Extract<SessionEvent, { type: T }>;
type Handler<T extends EventType> = (d: Draft, e: EventOf<T>) => void;

/** One small handler per event type; each changes only what its event says. */
const handlers: { readonly [T in EventType]: Handler<T> } = {
  "session/created": ({ s }, e) => {
    s.title = e.data.title ?? s.title;
    s.model = e.data.model ?? s.model;
    s.origin = e.data.origin ?? s.origin;
    s.createdAt = e.at;
    s.forkOf = e.data.forkOf ?? null;
  },
  "session/renamed": ({ s }, e) => {
    s.title = e.data.title;
  },
  "session/model": ({ s }, e) => {
    s.model = e.data.model;
  },
  "turn/start": ({ s }, e) => {
    s.turns.push({
      turnId: e.data.turnId,
      trigger: e.data.trigger,
      state: "working",
      startedAt: e.at,
      endedAt: null,
      startSeq: e.seq,
      interrupted: false,
    });
    s.openTurnId = e.data.turnId;
    s.streaming = true;
    s.tail = -1;
  },
  "user/message": ({ s }, e) => {
    const d = e.data;
    s.messages.push({
      role: "user",
      index: s.messages.length + 1,
      id: d.messageId,
      seq: e.seq,
      at: e.at,
      turnId: s.openTurnId,
      text: d.display ?? d.text,
      source: d.source,
      attachments: d.attachments,
      interjection: d.interjection === true,
      hidden: skipsPrompt(d),
      meta: d.meta,
    });
    // Output after an interjection belongs below it, on a new assistant message.
    s.tail = -1;
  },
  "assistant/delta": (draft, e) => {
    if (e.data.text.length === 0) return;
    const m = draft.assistant(e.data.turnId, e);
    m.text += e.data.text;
    const last = m.segments[m.segments.length - 1];
    if (last?.kind === "text")
      m.segments[m.segments.length - 1] = { kind: "text", text: last.text + e.data.text };
    else m.segments.push({ kind: "text", text: e.data.text });
  },
  "reasoning/delta": (draft, e) => {
    draft.assistant(e.data.turnId, e).reasoning += e.data.text;
  },
  "tool/call": (draft, e) => {
    const m = draft.assistant(e.data.turnId, e);
    const d = e.data;
    m.toolCalls.push({
      id: d.toolCallId,
      name: d.name,
      args: d.args,
      ok: null,
      result: null,
      duration_ms: null,
    });
    m.segments.push({ kind: "tool", toolId: d.toolCallId });
  },
  "tool/result": (draft, e) => {
    const d = e.data;
    draft.updateToolCall(d.turnId, d.toolCallId, (c) => ({
      ...c,
      ok: d.ok,
      result: d.result,
      duration_ms: d.durationMs,
    }));
  },
  "interaction/requested": (draft, e) => {
    const d = e.data;
    const pending: PendingInteraction = {
      interactionId: d.interactionId,
      turnId: d.turnId,
      kind: d.kind,
      requestedAt: e.at,
      seq: e.seq,
    };
    const block: InteractionBlock = {
      type: "interaction",
      interactionId: d.interactionId,
      kind: d.kind,
      resolution: null,
    };
    if (d.action !== undefined) pending.action = block.action = d.action;
    if (d.question !== undefined) pending.question = block.question = d.question;
    if (d.options !== undefined) pending.options = block.options = d.options;
    if (d.toolCallId !== undefined) pending.toolCallId = block.toolCallId = d.toolCallId;
    draft.s.pending.push(pending);
    draft.assistant(d.turnId, e).segments.push({ kind: "block", block });
    draft.setTurnState(d.turnId, "input-required");
  },
  "interaction/resolved": (draft, e) => {
    const { s } = draft;
    const idx = s.pending.findIndex((p) => p.interactionId === e.data.interactionId);
    if (idx < 0) return;
    const [p] = s.pending.splice(idx, 1);
    draft.resolveBlock(p!.turnId, p!.interactionId, e.data.resolution);
    if (!s.pending.some((q) => q.turnId === p!.turnId)) draft.setTurnState(p!.turnId, "working");
  },
  "turn/end": (draft, e) => {
    const { s } = draft;
    const d = e.data;
    const i = draft.turnIndex(d.turnId);
    if (i >= 0) {
      const t: TranscriptTurn = {
        ...s.turns[i]!,
        state: d.state,
        endedAt: e.at,
        interrupted: STOPPED_EARLY.has(d.state),
      };
      if (d.error !== undefined) t.error = d.error;
      if (d.byFork) t.byFork = true;
      s.turns[i] = t;
    }
    // An interaction of an ended turn can no longer be answered.
    if (s.pending.some((p) => p.turnId === d.turnId))
      s.pending = s.pending.filter((p) => p.turnId !== d.turnId);
    if (s.openTurnId === d.turnId) {
      s.openTurnId = null;
      s.streaming = false;
      s.tail = -1;
    }
  },
  // A job's progress is live state (the control stream's `jobs`); the log says where it started
  // and how it ended, so a transcript shows its outcome after the control stream has dropped it.
  "job/started": (draft, e) => {
    const d = e.data;
    const m = draft.assistant(d.turnId, e);
    m.jobs.push({ jobId: d.jobId, label: d.label, startedAt: e.at, state: "running", endedAt: null });
    m.segments.push({ kind: "job", jobId: d.jobId });
    draft.s.runningJobs.push({ jobId: d.jobId, message: draft.s.tail });
  },
  "job/ended": (draft, e) => {
    draft.endJob(e.data.jobId, e.data.state, e.at, e.data.byFork);
  },
};

/**
 * A prompt a rebuilt transcript leaves out: one sent hidden, or stamped `hidden` or with an
 * `origin` (sent on a person's behalf, not typed by them). Every reader (HTTP views, SDK, console)
 * skips these through this one rule.
 */
function skipsPrompt(d: EventOf<"user/message">["data"]): boolean {
  return d.hidden === true || d.meta.hidden === true || d.meta.origin !== undefined;
}

/** End states of a turn that did not run to its own end: a person cancelled it, or the host stopped. */
const STOPPED_EARLY: ReadonlySet<TranscriptTurn["state"]> = new Set(["cancelled", "interrupted"]);

class Draft {
  readonly s: TranscriptState;
  /** Objects created in this batch, safe to mutate in place. */
  readonly #owned = new WeakSet<object>();

  constructor(base: TranscriptState) {
    this.s = {
      ...base,
      messages: base.messages.slice(),
      turns: base.turns.slice(),
      pending: base.pending.slice(),
      runningJobs: base.runningJobs.slice(),
    };
  }

  /** The assistant message taking output of `turnId` now: the trailing one, or a new one. */
  assistant(turnId: string, e: SessionEvent): AssistantTranscriptMessage {
    const s = this.s;
    const current = s.tail >= 0 ? s.messages[s.tail] : undefined;
    if (current?.role === "assistant" && current.turnId === turnId) {
      const owned = this.#own(s.tail, current);
      owned.updatedAt = e.at;
      return owned;
    }
    let n = 0;
    for (let i = s.messages.length - 1; i >= 0; i--) {
      const m = s.messages[i]!;
      if (m.turnId !== turnId) break;
      if (m.role === "assistant") n++;
    }
    const created: AssistantTranscriptMessage = {
      role: "assistant",
      index: s.messages.length + 1,
      id: `${turnId}.${n}`,
      seq: e.seq,
      at: e.at,
      updatedAt: e.at,
      turnId,
      text: "",
      reasoning: "",
      segments: [],
      toolCalls: [],
      jobs: [],
    };
    this.#owned.add(created);
    s.messages.push(created);
    s.tail = s.messages.length - 1;
    return created;
  }

  #own(index: number, m: AssistantTranscriptMessage): AssistantTranscriptMessage {
    if (this.#owned.has(m)) return m;
    const copy = { ...m, segments: m.segments.slice(), toolCalls: m.toolCalls.slice(), jobs: m.jobs.slice() };
    this.#owned.add(copy);
    this.s.messages[index] = copy;
    return copy;
  }

  /** Scans back over the messages of `turnId` only (they sit at the end of the log). */
  #forEachAssistantOfTurn(
    turnId: string,
    visit: (m: AssistantTranscriptMessage, index: number) => boolean,
  ): void {
    const messages = this.s.messages;
    for (let i = messages.length - 1; i >= 0; i--) {
      const m = messages[i]!;
      if (m.turnId !== turnId) break;
      if (m.role === "assistant" && visit(m, i)) return;
    }
  }

  updateToolCall(turnId: string, toolId: string, update: (c: ToolCall) => ToolCall): void {
    this.#forEachAssistantOfTurn(turnId, (m, i) => {
      const k = m.toolCalls.findIndex((c) => c.id === toolId);
      if (k < 0) return false;
      const owned = this.#own(i, m);
      owned.toolCalls[k] = update(owned.toolCalls[k]!);
      return true;
    });
  }

  resolveBlock(turnId: string, interactionId: string, resolution: Resolution): void {
    this.#forEachAssistantOfTurn(turnId, (m, i) => {
      const k = m.segments.findIndex((g) => g.kind === "block" && g.block.interactionId === interactionId);
      if (k < 0) return false;
      const owned = this.#own(i, m);
      const seg = owned.segments[k] as Extract<Segment, { kind: "block" }>;
      owned.segments[k] = { kind: "block", block: { ...seg.block, resolution } };
      return true;
    });
  }

  /** A job started in this epoch ended: its entry, in the message where it started, shows how. */
  endJob(jobId: string, state: TurnEndState, at: number, byFork: true | undefined): void {
    const running = this.s.runningJobs;
    const r = running.findIndex((j) => j.jobId === jobId);
    if (r < 0) return;
    const { message } = running[r]!;
    running.splice(r, 1);
    // `job/started` put the job in this assistant message when it registered it here
    const owned = this.#own(message, this.s.messages[message] as AssistantTranscriptMessage);
    const k = owned.jobs.findIndex((j) => j.jobId === jobId);
    const ended: TranscriptJob = { ...owned.jobs[k]!, state, endedAt: at };
    if (byFork) ended.byFork = true;
    owned.jobs[k] = ended;
  }

  turnIndex(turnId: string): number {
    const turns = this.s.turns;
    for (let i = turns.length - 1; i >= 0; i--) if (turns[i]!.turnId === turnId) return i;
    return -1;
  }

  setTurnState(turnId: string, state: "working" | "input-required"): void {
    const i = this.turnIndex(turnId);
    const t = this.s.turns[i];
    if (!t || t.endedAt !== null || t.state === state) return;
    this.s.turns[i] = { ...t, state };
  }
}
