import type { IncomingMessage, ServerResponse } from "node:http";
import { isSessionId } from "../../../protocol/index.js";
import type { HostApi } from "../../host/host-api.js";
import type { Principal } from "../../host/principal.js";
import type { BodiesReceiving } from "./bodies-receiving.js";
import { fail } from "./http-reply.js";
import type { SessionListCache } from "./session-list-cache.js";
import type { TranscriptReading } from "./session-transcript.js";

/** What a route handler gets: the authenticated principal and the parts of the URL it matched. */
export interface RouteContext {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly host: HostApi;
  readonly principal: Principal;
  /** Capture groups of the route pattern, still percent-encoded. */
  readonly params: readonly string[];
  readonly query: URLSearchParams;
  readonly maxBodyBytes: number;
  /** The JSON bodies being read, by principal; see `readJsonBody`. */
  readonly jsonBodies: BodiesReceiving;
  readonly transcripts: TranscriptReading;
  readonly sessionLists: SessionListCache;
  readonly uploads: UploadLimits;
}

/** What `POST /v1/attachments` may accept (docs/reliability.md "Limits"). */
export interface UploadLimits {
  /** @default 10 MiB — one upload; more is `payload_too_large`. */
  readonly maxBytes: number;
  /**
   * @default 64 MiB — a principal's uploads no prompt references yet, those being received
   * included; more is `upload_quota_exceeded`.
   */
  readonly quotaBytes: number;
  /** Where the stored ones are counted; without one there is no quota. */
  readonly ledger: UploadLedger | undefined;
  /** The uploads being received, each counted from its declared size or first byte. */
  readonly receiving: BodiesReceiving;
}

export interface UploadLedger {
  /** Bytes of `owner`'s uploads no prompt references yet, each counted at least `UPLOAD_MIN_COUNTED_BYTES`. */
  pendingBytes(owner: string): Promise<number>;
}

export interface Route {
  readonly method: "GET" | "POST" | "DELETE";
  readonly pattern: RegExp;
  /** The metrics label, e.g. `GET /v1/sessions/:id`. */
  readonly name: string;
  handle(ctx: RouteContext): Promise<void>;
}

/** A session, interaction or attachment id from the path; outside the id alphabet is `bad_request`. */
export function idParam(ctx: RouteContext, index: number, field: string): string {
  let value: string;
  try {
    value = decodeURIComponent(ctx.params[index] ?? "");
  } catch {
    throw fail("bad_request", `${field} is not valid percent-encoding`, { field });
  }
  if (!isSessionId(value))
    throw fail("bad_request", `${field} must be 1-128 chars of [A-Za-z0-9_-]`, { field });
  return value;
}

/** An integer query parameter in [min, max]; absent gives `fallback`. */
export function intQuery(
  ctx: RouteContext,
  name: string,
  min: number,
  max: number,
  fallback: number,
): number {
  const raw = ctx.query.get(name);
  if (raw === null) return fallback;
  // at most ten digits, so the largest value taken is the smaller of `max` and 9,999,999,999
  const value = /^[0-9]{1,10}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(value >= min && value <= max)) {
    const top = Math.min(max, 9_999_999_999);
    throw fail("bad_request", `${name} must be a whole number from ${min} to ${top}`, { field: name });
  }
  return value;
}

/** `true`/`false` (or `1`/`0`); absent gives undefined. */
export function boolQuery(ctx: RouteContext, name: string): boolean | undefined {
  const raw = ctx.query.get(name);
  if (raw === null) return undefined;
  if (raw === "true" || raw === "1") return true;
  if (raw === "false" || raw === "0") return false;
  throw fail("bad_request", `${name} must be true or false`, { field: name });
}
