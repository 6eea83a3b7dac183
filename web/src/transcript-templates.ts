import { html, nothing, type TemplateResult } from "lit-html";
import { Limits } from "../../protocol/limits.js";
import type {
  AssistantTranscriptMessage,
  InteractionBlock,
  ToolCall,
  TranscriptJob,
  TranscriptTurn,
  UserTranscriptMessage,
} from "../../protocol/transcript.js";
import type { TranscriptRow } from "./transcript-rows.js";

/**
 * How rows are drawn right now. While the console is offline or its token was refused, open
 * questions stay visible but cannot be answered: an answer could not reach the host anyway.
 * `answered`: the interactions this tab sent an answer for that the host has not refused; their
 * cards take no second answer while the first is on its way, and take one again once refused.
 */
export interface RowContext {
  readonly actionable: boolean;
  readonly answered: ReadonlySet<string>;
}

const formatJson = (value: unknown): string => {
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    return String(value);
  }
};

/**
 * A call without a result waits on the person while a card about it is open, runs while its turn
 * is open otherwise, and after its turn ended never returned.
 */
function toolStatus(call: ToolCall, turnEnded: boolean, waitingOn: InteractionBlock | undefined): string {
  if (call.ok !== null) return call.ok ? `ok · ${call.duration_ms ?? 0} ms` : "failed";
  if (turnEnded) return "no result: the turn ended";
  if (waitingOn) return waitingOn.kind === "approval" ? "waiting for approval" : "waiting for an answer";
  return "running…";
}

function toolTemplate(
  call: ToolCall | undefined,
  toolId: string,
  turnEnded: boolean,
  waitingOn: InteractionBlock | undefined,
): TemplateResult {
  if (!call) return html`<div class="tool"></div>`;
  const status = toolStatus(call, turnEnded, waitingOn);
  return html`<details class="tool" data-testid="tool-call" data-tool-id=${toolId}>
    <summary>
      <span>Tool</span><span class="tool-name">${call.name}</span>
      <span class="tool-status" data-ok=${call.ok === null ? nothing : String(call.ok)}>${status}</span>
    </summary>
    <pre>args: ${formatJson(call.args)}</pre>
    ${call.ok === null ? nothing : html`<pre data-testid="tool-result">${formatJson(call.result)}</pre>`}
  </details>`;
}

/** What became of a job; its live progress is the live panel's, this says how it ended. */
const JOB_OUTCOME: Record<TranscriptJob["state"], string> = {
  running: "running…",
  completed: "completed",
  failed: "failed",
  cancelled: "cancelled",
  interrupted: "interrupted (the host stopped while it ran)",
};

/** A job the fork ended: it ran on (or ran its course) in the source session only. */
const FORK_CUT_JOB = "not carried into this fork (it was running in the source session)";

function jobTemplate(job: TranscriptJob | undefined, jobId: string, forkCut: boolean): TemplateResult {
  if (!job) return html`<div class="job"></div>`;
  // a fork made before it ended the jobs it copied left them running in its log: ended all the same
  const state = forkCut ? "interrupted" : job.state;
  return html`<div class="job" data-testid="job" data-job-id=${jobId} data-state=${state}>
    <span>Job</span><span class="job-label" dir="auto">${job.label}</span>
    <span class="job-outcome">${forkCut ? FORK_CUT_JOB : JOB_OUTCOME[job.state]}</span>
  </div>`;
}

function resolutionText(block: InteractionBlock): string {
  const r = block.resolution;
  if (!r) return "No answer: the turn ended";
  return "outcome" in r ? (r.outcome === "approve" ? "Approved" : "Denied") : `Answered: ${r.answer}`;
}

function cardTemplate(block: InteractionBlock, open: boolean, ctx: RowContext): TemplateResult {
  const isApproval = block.kind === "approval";
  const title = isApproval ? "Approval needed" : "Question";
  const body = isApproval ? (block.action ?? "") : (block.question ?? "");
  const id = block.interactionId;
  if (!open) {
    return html`<div class="card resolved" data-testid="interaction-resolved" data-interaction-id=${id}>
      <div class="card-title">${title}: <bdi>${body}</bdi></div>
      <div>${resolutionText(block)}</div>
    </div>`;
  }
  const off = !ctx.actionable || ctx.answered.has(id);
  const actions = isApproval
    ? html`<button class="primary" data-action="approve" data-interaction-id=${id} data-testid="approve"
          ?disabled=${off}>Approve</button>
        <button data-action="deny" data-interaction-id=${id} data-testid="deny" ?disabled=${off}>Deny</button>`
    : html`${(block.options ?? []).map(
        (o) =>
          html`<button data-action="answer-option" data-interaction-id=${id} data-answer=${o} ?disabled=${off}>
              ${o}
            </button>`,
      )}
        <input type="text" dir="auto" placeholder="Your answer" aria-label="Your answer" data-testid="answer-input"
          data-interaction-id=${id} ?disabled=${off} />
        <button class="primary" data-action="answer" data-interaction-id=${id} data-testid="answer" ?disabled=${off}>
          Answer
        </button>`;
  return html`<div class="card" data-testid="interaction-card" data-interaction-id=${id} data-kind=${block.kind}
    data-stale=${ctx.actionable ? nothing : "true"}>
    <div class="card-title">${title}</div>
    <div class="card-body" dir="auto">${body}</div>
    <div class="card-actions">${actions}</div>
  </div>`;
}

/**
 * The host stores the first 16,000 characters of a message (one fewer when the cut would split a
 * character's two halves), so a message this long may have been longer when sent: said under it,
 * so the bubble never passes for the whole of what was written.
 */
const MAY_BE_CUT = Limits.maxMessageChars - 1;

function userTemplate(m: UserTranscriptMessage): TemplateResult {
  const role = m.interjection ? "Interjection" : m.source === "server" ? "Server" : "You";
  const names = m.attachments.map((a) => `📎 ${a.name}`).join("  ");
  return html`<div class="message user${m.interjection ? " interjection" : ""}" data-testid="user-message"
    data-seq=${m.seq} data-interjection=${m.interjection ? "true" : nothing}>
    <span class="role">${role}</span>
    <div class="bubble" dir="auto">${m.text}${names ? `\n${names}` : nothing}</div>
    ${
      m.text.length >= MAY_BE_CUT
        ? html`<span class="message-note" data-testid="message-cut">The host keeps the first
            ${Limits.maxMessageChars.toLocaleString("en")} characters of a message: anything past them is not shown.</span>`
        : nothing
    }
  </div>`;
}

function assistantTemplate(
  m: AssistantTranscriptMessage,
  streaming: boolean,
  pending: readonly string[],
  turnEnded: boolean,
  forkCutJobs: readonly string[],
  ctx: RowContext,
): TemplateResult {
  const lastText = m.segments.reduce((last, s, i) => (s.kind === "text" ? i : last), -1);
  const openCards = new Map<string, InteractionBlock>();
  for (const s of m.segments) {
    if (s.kind === "block" && s.block.toolCallId !== undefined && pending.includes(s.block.interactionId))
      openCards.set(s.block.toolCallId, s.block);
  }
  const last = m.segments.length - 1;
  const segments = m.segments.map((s, i) => {
    if (s.kind === "text") {
      const caret = streaming && i === lastText && i === last;
      return html`<div class="bubble${caret ? " streaming-caret" : ""}" data-testid="assistant-text" dir="auto">${s.text}</div>`;
    }
    if (s.kind === "tool")
      return toolTemplate(
        m.toolCalls.find((c) => c.id === s.toolId),
        s.toolId,
        turnEnded,
        openCards.get(s.toolId),
      );
    if (s.kind === "job")
      return jobTemplate(
        m.jobs.find((j) => j.jobId === s.jobId),
        s.jobId,
        forkCutJobs.includes(s.jobId),
      );
    const open = s.block.resolution === null && pending.includes(s.block.interactionId);
    return cardTemplate(s.block, open, ctx);
  });
  return html`<div class="message assistant" data-testid="assistant-message"
    data-streaming=${streaming ? "true" : nothing}>
    <span class="role">Agent</span>
    ${segments}
    ${streaming && lastText !== last ? html`<div class="bubble streaming-caret"></div>` : nothing}
  </div>`;
}

function flagTemplate(turn: TranscriptTurn, forkCut: boolean): TemplateResult {
  const text =
    turn.state === "interrupted"
      ? forkCut
        ? "Turn cut off by the fork (it was still running in the source session)"
        : "Turn interrupted (the host stopped before it finished)"
      : turn.state === "cancelled"
        ? "Turn cancelled"
        : `Turn failed${turn.error ? `: ${turn.error}` : ""}`;
  return html`<div class="message">
    <div class="turn-flag ${turn.state}" data-testid="turn-flag" data-state=${turn.state}>${text}</div>
  </div>`;
}

export function rowTemplate(row: TranscriptRow, ctx: RowContext): TemplateResult {
  if (row.kind === "user") return userTemplate(row.msg);
  if (row.kind === "turn-flag") return flagTemplate(row.turn, row.forkCut);
  return assistantTemplate(row.msg, row.streaming, row.pending, row.turnEnded, row.forkCutJobs, ctx);
}
