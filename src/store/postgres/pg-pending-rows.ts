import type { ProjectionState } from "../projection.js";
import type { SessionState } from "../session-state.js";

/** PostgreSQL text cannot hold U+0000; free text (titles, search text) drops it. */
export function storableText(text: string): string {
  return text.includes("\u0000") ? text.replaceAll("\u0000", "") : text;
}

const PROJECTION_COLUMNS = [
  ["session_id", "text"],
  ["owner", "text"],
  ["epoch", "text"],
  ["title", "text"],
  ["title_explicit", "boolean"],
  ["model", "text"],
  ["created_at", "bigint"],
  ["last_prompt_at", "bigint"],
  ["updated_at", "bigint"],
  ["turn_count", "integer"],
  ["blank", "boolean"],
  ["last_state", "text"],
  ["message_count", "integer"],
  ["seq", "bigint"],
  ["open_turn_id", "text"],
  ["turn_has_text", "boolean"],
  ["has_unseen_completion", "boolean"],
  ["completion_settled_at", "bigint"],
  ["acked_settled_at", "bigint"],
] as const;
const PROJECTION_NAMES = PROJECTION_COLUMNS.map(([name]) => name).join(", ");

function projectionColumns(rows: readonly ProjectionState[]): unknown[][] {
  return [
    rows.map((r) => r.sessionId),
    rows.map((r) => r.owner),
    rows.map((r) => r.epoch),
    rows.map((r) => storableText(r.title)),
    rows.map((r) => r.titleExplicit),
    rows.map((r) => storableText(r.model)),
    rows.map((r) => r.createdAt),
    rows.map((r) => r.lastPromptAt),
    rows.map((r) => r.updatedAt),
    rows.map((r) => r.turnCount),
    rows.map((r) => r.blank),
    rows.map((r) => r.lastState),
    rows.map((r) => r.messageCount),
    rows.map((r) => r.seq),
    rows.map((r) => r.openTurnId),
    rows.map((r) => r.turnHasText),
    rows.map((r) => r.hasUnseenCompletion),
    rows.map((r) => r.completionSettledAt),
    rows.map((r) => r.ackedSettledAt),
  ];
}

/** One data-modifying part of the write statement; `$n` placeholders are numbered from 1. */
interface Part {
  sql: string;
  params: unknown[];
}

/** `unnest($1::t1[], $2::t2[], …)` for the given column types. */
function unnest(types: readonly string[]): string {
  return `unnest(${types.map((type, i) => `$${i + 1}::${type}[]`).join(", ")})`;
}

/**
 * Rows a transaction's operations produced, kept column-wise and written by ONE statement (one
 * round trip) whose parts are data-modifying CTEs: events, prompt keys, attachment links, search
 * documents, then the projections (which hold the heads) of the touched sessions. Each part is one `unnest`, so a
 * batch of a hundred appends costs what one multi-row insert costs.
 */
export class PendingRows {
  private events: [string[], number[], string[], number[], Buffer[]] = [[], [], [], [], []];
  private prompts: [string[], string[], Buffer[]] = [[], [], []];
  private links: [string[], string[]] = [[], []];
  private search: [string[], number[], string[]] = [[], [], []];

  event(sessionId: string, seq: number, type: string, at: number, data: Uint8Array): void {
    this.events[0].push(sessionId);
    this.events[1].push(seq);
    this.events[2].push(type);
    this.events[3].push(at);
    this.events[4].push(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
  }

  prompt(sessionId: string, clientMessageId: string, record: Uint8Array): void {
    this.prompts[0].push(sessionId);
    this.prompts[1].push(clientMessageId);
    this.prompts[2].push(Buffer.from(record));
  }

  link(sessionId: string, attachmentId: string): void {
    this.links[0].push(sessionId);
    this.links[1].push(attachmentId);
  }

  document(sessionId: string, seq: number, text: string): void {
    this.search[0].push(sessionId);
    this.search[1].push(seq);
    this.search[2].push(storableText(text));
  }

  /**
   * The statement writing everything pending (and, when given, the projections (heads) of
   * `states`, inserting the projections of `created` sessions); null when there is nothing to
   * write. Taking it empties the pending rows.
   */
  take(states: readonly SessionState[] = [], created: ReadonlySet<string> = new Set()): Part | null {
    const parts: Part[] = [];
    if (this.events[0].length > 0) {
      parts.push({
        sql: `INSERT INTO events (session_id, seq, type, at, data)
          SELECT * FROM ${unnest(["text", "bigint", "text", "bigint", "bytea"])}`,
        params: this.events,
      });
    }
    if (this.prompts[0].length > 0) {
      // no ON CONFLICT: a key another write holds aborts this transaction, never appends twice
      parts.push({
        sql: `INSERT INTO prompt_keys (session_id, client_message_id, record)
          SELECT * FROM ${unnest(["text", "text", "bytea"])}`,
        params: this.prompts,
      });
    }
    if (this.links[0].length > 0) {
      parts.push({
        sql: `UPDATE attachments a SET session_id = v.session_id FROM ${unnest(["text", "text"])}
          AS v(session_id, attachment_id) WHERE a.attachment_id = v.attachment_id AND a.session_id IS NULL`,
        params: this.links,
      });
    }
    if (this.search[0].length > 0) {
      parts.push({
        sql: `INSERT INTO search_docs (session_id, seq, text) SELECT * FROM ${unnest(["text", "bigint", "text"])}`,
        params: this.search,
      });
    }
    if (states.length > 0) {
      const fresh = states.filter((s) => created.has(s.sessionId)).map((s) => s.projection);
      const known = states.filter((s) => !created.has(s.sessionId)).map((s) => s.projection);
      const types = PROJECTION_COLUMNS.map(([, type]) => type);
      if (fresh.length > 0) {
        parts.push({
          sql: `INSERT INTO projections (${PROJECTION_NAMES}) SELECT * FROM ${unnest(types)}`,
          params: projectionColumns(fresh),
        });
      }
      if (known.length > 0) {
        parts.push({
          sql: `UPDATE projections p SET ${PROJECTION_COLUMNS.slice(1)
            .map(([name]) => `${name} = v.${name}`)
            .join(", ")} FROM ${unnest(types)} AS v(${PROJECTION_NAMES}) WHERE p.session_id = v.session_id`,
          params: projectionColumns(known),
        });
      }
    }
    this.events = [[], [], [], [], []];
    this.prompts = [[], [], []];
    this.links = [[], []];
    this.search = [[], [], []];
    return combine(parts);
  }
}

/** Joins parts into one statement, renumbering each part's placeholders after the previous ones. */
function combine(parts: Part[]): Part | null {
  if (parts.length === 0) return null;
  const params: unknown[] = [];
  const ctes = parts.map((part, i) => {
    const offset = params.length;
    params.push(...part.params);
    return `w${i} AS (${part.sql.replace(/\$(\d+)/g, (_, n: string) => `$${Number(n) + offset}`)})`;
  });
  return { sql: `WITH ${ctes.join(",\n")} SELECT 1`, params };
}
