/**
 * A replay array encoded inside SQLite: one query returns what `encodeEventArrays` writes for the
 * same rows, byte for byte, as one blob: the caller's envelope, the MessagePack array header and
 * each event's map `{seq, at, type, data}`. Reading 500 events then costs one row and one buffer,
 * sent as it is, instead of 500 row arrays and hex strings copied into the frame: about half the
 * CPU of reading and encoding a replay.
 *
 * The SQL writes every number in its shortest MessagePack form, as `encodeEventArrays` does, for
 * the integers a log holds (`seq` always; `at` when it is a whole number of milliseconds from 0
 * to 2^53 − 1) and a type of at most 31 bytes (a fixstr). A page holding anything else (counted
 * in `unencodable`) is read again through `encodeEventArrays`.
 *
 * The maps are concatenated in the order the ordered subquery yields its rows: SQLite feeds an
 * aggregate from a subquery with ORDER BY and LIMIT as a co-routine, row by row in that order.
 * An explicit ORDER BY inside `group_concat` would sort the page a second time (a third of the
 * query's cost). `test/store/sqlite-event-encoding.test.ts` compares the bytes with
 * `encodeEventArrays` over many pages.
 */

/** The MessagePack `printf` format of a non-negative integer column, shortest form first. */
const uintFormat = (column: string) =>
  `CASE WHEN ${column} < 128 THEN '%02X' WHEN ${column} < 256 THEN 'CC%02X' ` +
  `WHEN ${column} < 65536 THEN 'CD%04X' WHEN ${column} < 4294967296 THEN 'CE%08X' ELSE 'CF%016X' END`;

/** Hex of the fixmap header and of the keys `seq`, `at`, `type`, `data` (fixstr each). */
const MAP_AND_SEQ_KEY = "84A3736571";
const AT_KEY = "A26174";
const TYPE_KEY = "A474797065";
const DATA_KEY = "A464617461";

/** One event's map: the numbers and the type's fixstr header as hex, then the type and data bytes. */
const EVENT_MAP =
  `unhex(printf('${MAP_AND_SEQ_KEY}' || ${uintFormat("seq")} || '${AT_KEY}' || ${uintFormat("at")} ` +
  `|| '${TYPE_KEY}%02X', seq, at, 160 + length(CAST(type AS BLOB)))) ` +
  `|| CAST(type AS BLOB) || x'${DATA_KEY}' || data`;

/** Rows whose `at` or `type` the SQL above cannot encode as `encodeEventArrays` would. */
const UNENCODABLE =
  "typeof(at) <> 'integer' OR at < 0 OR at > 9007199254740991 OR length(CAST(type AS BLOB)) > 31";

/** The MessagePack header of an array of `count(*)` elements, as hex. */
const ARRAY_HEADER =
  "CASE WHEN count(*) < 16 THEN printf('%02X', 144 + count(*)) " +
  "WHEN count(*) < 65536 THEN printf('DC%04X', count(*)) ELSE printf('DD%08X', count(*)) END";

/** Data size from which an event enters the `events_large` index (migration 6). */
export const LARGE_EVENT_BYTES = 2048;

/**
 * `{sessionId, afterSeq}` → the first seq after `afterSeq` whose event is in `events_large` (null:
 * none is), by one probe of that index. The planner preferred the primary key, so it is named.
 */
export const FIRST_LARGE_AFTER =
  "SELECT min(seq) FROM events INDEXED BY events_large " +
  `WHERE session_id = @sessionId AND seq > @afterSeq AND length(data) > ${LARGE_EVENT_BYTES}`;

/**
 * The last seq of the page: at most `@limit` events, and none once the data of those before it
 * reached `@maxBytes`, so a page of large events stays under that plus one event. A log's seqs
 * are contiguous, so the page ends at `@afterSeq + @limit` at the latest; when `events_large`
 * holds none of those seqs, no event in it is over `LARGE_EVENT_BYTES` and the page is under
 * `@limit` times that, which is under `@maxBytes` for a page of up to 500 events: one index probe
 * decides. Otherwise a running sum of the rows' lengths finds the cut (a window over the page,
 * which would cost a third of the whole query if every page ran it).
 */
const PAGE_END =
  `CASE WHEN @limit * ${LARGE_EVENT_BYTES} <= @maxBytes AND coalesce((${FIRST_LARGE_AFTER}), ` +
  "@afterSeq + @limit + 1) > @afterSeq + @limit THEN @afterSeq + @limit ELSE " +
  "(SELECT max(seq) FROM (SELECT seq, sum(length(data)) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) " +
  "- length(data) AS before FROM events WHERE session_id = @sessionId AND seq > @afterSeq " +
  "ORDER BY seq LIMIT @limit) WHERE before < @maxBytes) END";

/**
 * `{envelope, sessionId, afterSeq, limit, maxBytes}` → one row `[count, lastSeq, unencodable,
 * array]`; `array` is null when the page is empty. Blobs concatenated with `||` keep every byte.
 */
export const EVENTS_AFTER_ENCODED =
  `SELECT count(*), max(seq), sum(${UNENCODABLE}), ` +
  `CAST(@envelope || unhex(${ARRAY_HEADER}) || group_concat(${EVENT_MAP}, '') AS BLOB) ` +
  "FROM (SELECT seq, at, type, data FROM events WHERE session_id = @sessionId AND seq > @afterSeq " +
  `AND seq <= ${PAGE_END} ORDER BY seq LIMIT @limit)`;

/** The row `EVENTS_AFTER_ENCODED` returns. */
export type EncodedPageRow = [
  count: number,
  lastSeq: number | null,
  unencodable: number | null,
  array: Buffer | null,
];
