import type { ProjectionState } from "../projection.js";
import type { SessionState } from "../session-state.js";
import { integerArrayLiteral, textArrayLiteral } from "./pg-array-literal.js";

/** PostgreSQL text cannot hold U+0000; free text (titles, search text) drops it. */
export function storableText(text: string): string {
  return text.includes("\u0000") ? text.replaceAll("\u0000", "") : text;
}

/** The projection row's columns: name, SQL type, and the value a projection state gives it. */
const PROJECTION_COLUMNS: readonly (readonly [string, string, (r: ProjectionState) => unknown])[] = [
  ["session_id", "text", (r) => r.sessionId],
  ["owner", "text", (r) => r.owner],
  ["epoch", "text", (r) => r.epoch],
  ["title", "text", (r) => storableText(r.title)],
  ["title_explicit", "boolean", (r) => r.titleExplicit],
  ["model", "text", (r) => storableText(r.model)],
  ["created_at", "bigint", (r) => r.createdAt],
  ["last_prompt_at", "bigint", (r) => r.lastPromptAt],
  ["updated_at", "bigint", (r) => r.updatedAt],
  ["turn_count", "integer", (r) => r.turnCount],
  ["blank", "boolean", (r) => r.blank],
  ["last_state", "text", (r) => r.lastState],
  ["message_count", "integer", (r) => r.messageCount],
  ["seq", "bigint", (r) => r.seq],
  ["open_turn_id", "text", (r) => r.openTurnId],
  ["turn_has_text", "boolean", (r) => r.turnHasText],
  ["pending_interactions", "integer", (r) => r.pendingInteractions],
  ["has_unseen_completion", "boolean", (r) => r.hasUnseenCompletion],
  ["completion_settled_at", "bigint", (r) => r.completionSettledAt],
  ["acked_settled_at", "bigint", (r) => r.ackedSettledAt],
];
const PROJECTION_NAMES = PROJECTION_COLUMNS.map(([name]) => name).join(", ");
const PROJECTION_TYPES = PROJECTION_COLUMNS.map(([, type]) => type);

// every write of a projection row stamps it with the writing transaction (see migration 6)
const WRITER_VERSION = "pg_current_xact_id()::text::bigint";

const projectionColumns = (rows: readonly ProjectionState[]): unknown[][] =>
  PROJECTION_COLUMNS.map(([, , value]) => rows.map(value));

/** A statement with `$n` placeholders numbered from 1. */
export interface Statement {
  sql: string;
  params: unknown[];
  /** The name it is prepared under on a connection (one per distinct text, of which there are few). */
  name?: string;
}

/** What the commit's write statement writes besides the pending rows. */
export interface CommitRows {
  /**
   * The sessions the transaction touched: the projection rows of `created` ones are inserted, the
   * `written` ones updated whole, the others (only their heads moved) left as they are.
   */
  states: readonly SessionState[];
  created: ReadonlySet<string>;
  written: ReadonlySet<string>;
  /** What the transaction moved each owner's stored data by, in owner order (`OwnerDataBytes.moved`). */
  ownerDataBytes: readonly (readonly [owner: string, bytes: number])[];
  /**
   * The query the statement ends with (a SELECT over what was there before the writes), instead
   * of `SELECT 1`; its `{expected}` is true only if, with `versions` given, every projection row
   * updated was still at the version listed for its session.
   */
  result?: Statement;
  versions?: ReadonlyMap<string, number>;
}

/** The text of a part of the write statement, and what it must have done (see `combine`). */
interface PartShape {
  sql: string;
  /**
   * A condition the transaction needs, over `{self}` (the rows the part returned) and the part's
   * own placeholders; the statement's `result` gets every part's condition as `{expected}`.
   */
  expect?: string;
  /** Its bit in the key of the statements cached (see `combine`). */
  bit: number;
}

/** A part with this transaction's values. */
interface Part {
  shape: PartShape;
  params: unknown[];
}

// Only the row version a batch on kept states used may be written: under the row lock, the
// version (stamped by every writer since migration 6) and the 32-bit id of the transaction that
// wrote the tuple (which a writer that does not stamp versions still changes) must both match.
const KEPT_VERSION = "p.version = v.version AND p.xmin::text::bigint = v.version % 4294967296";
const EVERY_ROW_WRITTEN = "(SELECT count(*) FROM {self}) = cardinality($1::text[])";

/** How the names of write statements that end with a check (see `take`'s `result`) begin. */
export const CHECKED_WRITE = "sessionmux_checked_write";

/** `unnest($1::t1[], $2::t2[], …)` for the given column types. */
function unnest(types: readonly string[]): string {
  return `unnest(${types.map((type, i) => `$${i + 1}::${type}[]`).join(", ")})`;
}

// The log's data bytes move up to its head as this statement sees it (before its own inserts):
// the events since the row was last written are summed, by their stored sizes (migration 16).
const LOG_TAIL = `FROM events e WHERE e.session_id = coalesce(p.log_key, p.session_id) AND e.seq > p.data_bytes_seq`;
const SET_PROJECTION = `UPDATE projections p SET ${PROJECTION_COLUMNS.slice(1)
  .map(([name]) => `${name} = v.${name}`)
  .join(", ")}, version = ${WRITER_VERSION},
  data_bytes = p.data_bytes + coalesce((SELECT sum(octet_length(e.data)) ${LOG_TAIL}), 0),
  data_bytes_seq = coalesce((SELECT max(e.seq) ${LOG_TAIL}), p.data_bytes_seq)`;

/** The parts of the write statement, in the order they run. */
const SHAPES = {
  // in owner order (see `OwnerDataBytes.moved`): two hosts take these rows' locks in one order
  usage: {
    sql: `INSERT INTO owner_usage (owner, stored_bytes)
      SELECT * FROM ${unnest(["text", "bigint"])} ON CONFLICT (owner)
      DO UPDATE SET stored_bytes = owner_usage.stored_bytes + EXCLUDED.stored_bytes`,
    bit: 1,
  },
  events: {
    sql: `INSERT INTO events (session_id, seq, type, at, data)
      SELECT e.session_id, e.seq, e.type, e.at, substring($7::bytea FROM e.start FOR e.length)
      FROM ${unnest(["text", "bigint", "text", "bigint", "integer", "integer"])}
        AS e(session_id, seq, type, at, start, length)`,
    bit: 2,
  },
  // no ON CONFLICT: a key another write holds aborts this transaction, never appends twice
  prompts: {
    sql: `INSERT INTO prompt_keys (session_id, client_message_id, record)
      SELECT * FROM ${unnest(["text", "text", "bytea"])}`,
    bit: 4,
  },
  links: {
    sql: `UPDATE attachments a SET session_id = v.session_id FROM ${unnest(["text", "text"])}
      AS v(session_id, attachment_id) WHERE a.attachment_id = v.attachment_id AND a.session_id IS NULL`,
    bit: 8,
  },
  search: {
    sql: `INSERT INTO search_docs (session_id, seq, text) SELECT * FROM ${unnest(["text", "bigint", "text"])}`,
    bit: 16,
  },
  // with the log's key: a session cleared in the transaction that created it has moved its log
  fresh: {
    sql: `INSERT INTO projections (${PROJECTION_NAMES}, log_key, version)
      SELECT *, ${WRITER_VERSION} FROM ${unnest([...PROJECTION_TYPES, "text"])}`,
    bit: 32,
  },
  changed: {
    sql: `${SET_PROJECTION} FROM ${unnest(PROJECTION_TYPES)} AS v(${PROJECTION_NAMES})
      WHERE p.session_id = v.session_id`,
    bit: 64,
  },
  // guarded: only rows still at their session's listed version are written, every one of them
  changedKept: {
    sql: `${SET_PROJECTION} FROM ${unnest([...PROJECTION_TYPES, "bigint"])} AS v(${PROJECTION_NAMES}, version)
      WHERE p.session_id = v.session_id AND ${KEPT_VERSION} RETURNING 1`,
    expect: EVERY_ROW_WRITTEN,
    bit: 128,
  },
} satisfies Record<string, PartShape>;

/**
 * Rows a transaction's operations produced, kept column-wise and written by ONE statement (one
 * round trip) whose parts are data-modifying CTEs: the owners' stored data, events, prompt keys,
 * attachment links, search documents, then the projections of the touched sessions that changed
 * beyond their heads. Each part is one `unnest`, so a batch of a hundred appends costs what one
 * multi-row insert costs.
 */
export class PendingRows {
  /** Session ids, seqs, types, times, and where each event's bytes start (from 1) and how many. */
  private events: [string[], number[], string[], number[], number[], number[]] = [[], [], [], [], [], []];
  /** The events' MessagePack bytes end to end: one binary parameter, no text escaping either way. */
  private eventBytes: Uint8Array[] = [];
  private eventByteCount = 0;
  private prompts: [string[], string[], Buffer[]] = [[], [], []];
  private links: [string[], string[]] = [[], []];
  private search: [string[], number[], string[]] = [[], [], []];

  event(sessionId: string, seq: number, type: string, at: number, data: Uint8Array): void {
    this.events[0].push(sessionId);
    this.events[1].push(seq);
    this.events[2].push(type);
    this.events[3].push(at);
    this.events[4].push(this.eventByteCount + 1);
    this.events[5].push(data.byteLength);
    this.eventBytes.push(data);
    this.eventByteCount += data.byteLength;
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
   * The statement writing everything pending, and with `commit` what only the commit's statement
   * writes (see `CommitRows`); null when there is nothing to write. Taking it empties the pending
   * rows.
   */
  take(commit?: CommitRows): Statement | null {
    const {
      states = [],
      created = new Set(),
      written = new Set(),
      ownerDataBytes: usage = [],
    } = commit ?? {};
    const { result, versions } = commit ?? {};
    const parts: Part[] = [];
    if (usage.length > 0) {
      parts.push({
        shape: SHAPES.usage,
        params: [
          textArrayLiteral(usage.map(([owner]) => owner)),
          integerArrayLiteral(usage.map(([, b]) => b)),
        ],
      });
    }
    if (this.events[0].length > 0) {
      parts.push({
        shape: SHAPES.events,
        params: [
          textArrayLiteral(this.events[0]),
          integerArrayLiteral(this.events[1]),
          textArrayLiteral(this.events[2]),
          integerArrayLiteral(this.events[3]),
          integerArrayLiteral(this.events[4]),
          integerArrayLiteral(this.events[5]),
          Buffer.concat(this.eventBytes, this.eventByteCount),
        ],
      });
    }
    if (this.prompts[0].length > 0) parts.push({ shape: SHAPES.prompts, params: this.prompts });
    if (this.links[0].length > 0) parts.push({ shape: SHAPES.links, params: this.links });
    if (this.search[0].length > 0) parts.push({ shape: SHAPES.search, params: this.search });
    const fresh: ProjectionState[] = [];
    const freshKeys: (string | null)[] = [];
    const changed: ProjectionState[] = [];
    for (const state of states) {
      if (created.has(state.sessionId)) {
        fresh.push(state.projection);
        freshKeys.push(state.logKey === state.sessionId ? null : state.logKey);
      } else if (written.has(state.sessionId)) changed.push(state.projection);
    }
    if (fresh.length > 0)
      parts.push({ shape: SHAPES.fresh, params: [...projectionColumns(fresh), freshKeys] });
    if (changed.length > 0) {
      const params = projectionColumns(changed);
      parts.push(
        versions
          ? {
              shape: SHAPES.changedKept,
              params: [...params, integerArrayLiteral(changed.map((r) => versions.get(r.sessionId) ?? -1))],
            }
          : { shape: SHAPES.changed, params },
      );
    }
    this.events = [[], [], [], [], [], []];
    this.eventBytes = [];
    this.eventByteCount = 0;
    this.prompts = [[], [], []];
    this.links = [[], []];
    this.search = [[], [], []];
    return combine(parts, result);
  }
}

/** The statements built so far, by their parts' bits and the result's text (see `combine`). */
const statements = new Map<string, Map<number, { sql: string; name: string }>>();
let prepared = 0;

/**
 * Joins parts into one statement, renumbering each part's placeholders (and those of its
 * expectation) after the previous ones; the parts' expectations, joined by AND, replace the
 * result's `{expected}`. A part's text and its count of placeholders are fixed, so the statement's
 * text depends only on which parts it has and on the result's: it is built once per such shape (at
 * most a few dozen) and prepared under its own name on each connection; a transaction only
 * gathers its values.
 */
function combine(parts: Part[], result?: Statement): Statement | null {
  if (parts.length === 0 && !result) return null;
  let bits = 0;
  for (const part of parts) bits |= part.shape.bit;
  let byBits = statements.get(result?.sql ?? "");
  if (!byBits) {
    byBits = new Map();
    statements.set(result?.sql ?? "", byBits);
  }
  let built = byBits.get(bits);
  if (!built) {
    built = build(parts, result);
    byBits.set(bits, built);
  }
  const params: unknown[] = [];
  for (const part of parts) for (const value of part.params) params.push(value);
  if (result) for (const value of result.params) params.push(value);
  return { sql: built.sql, params, name: built.name };
}

function build(parts: readonly Part[], result?: Statement): { sql: string; name: string } {
  let offset = 0;
  const expected: string[] = [];
  const renumber = (sql: string, by: number) =>
    sql.replace(/\$(\d+)/g, (_, n: string) => `$${Number(n) + by}`);
  const ctes = parts.map(({ shape, params }, i) => {
    const sql = renumber(shape.sql, offset);
    if (shape.expect) expected.push(renumber(shape.expect, offset).replaceAll("{self}", `w${i}`));
    offset += params.length;
    return `w${i} AS (${sql})`;
  });
  const end = result
    ? renumber(result.sql, offset).replace(
        "{expected}",
        expected.length > 0 ? expected.join(" AND ") : "true",
      )
    : "SELECT 1";
  const sql = ctes.length > 0 ? `WITH ${ctes.join(",\n")} ${end}` : end;
  return { sql, name: `${result ? CHECKED_WRITE : "sessionmux_write"}_${prepared++}` };
}
