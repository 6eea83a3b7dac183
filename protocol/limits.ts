import { DEFAULT_DECODE_LIMITS } from "./decode-limits.js";

/** Defaults of protocol-v1 §2 and §7. Every limit is also an option of the host. */
export const Limits = {
  /** @default 1 MiB — larger frames close the socket with 1009. */
  maxPayloadBytes: 1024 * 1024,
  /** @default 256 — open streams per socket. */
  maxStreamsPerSocket: 256,
  /** Decoder limits for untrusted MessagePack (`DEFAULT_DECODE_LIMITS`). */
  ...DEFAULT_DECODE_LIMITS,
  /** Stored user message text is capped at this many characters. */
  maxMessageChars: 16_000,
  /** Inline attachment bytes in a prompt. */
  maxInlineAttachmentBytes: 512 * 1024,
  /** Uploaded attachments via POST /v1/attachments. */
  maxAttachmentBytes: 10 * 1024 * 1024,
  /** @default 64 MiB of uploads per principal that no prompt references yet. */
  uploadQuotaBytes: 64 * 1024 * 1024,
  /**
   * @default 64 MiB of attachments one principal's running turns hold (their agents receive
   * them whole), the upload quota's size.
   */
  turnAttachmentBytesPerPrincipal: 64 * 1024 * 1024,
  /** @default 1 hour: an upload no prompt references by then is deleted. */
  uploadTtlMs: 60 * 60 * 1000,
  /** @default 10,000 live sessions per principal (admin exempt); more is `too_many_sessions`. */
  sessionsPerPrincipal: 10_000,
  /**
   * @default 1 GiB stored by one principal: its sessions' event data and its attachments (admin
   * exempt); past it a prompt, create, fork, rename, model choice or upload is
   * `storage_quota_exceeded`.
   */
  storedBytesPerPrincipal: 1024 * 1024 * 1024,
  /** Events per `events` item during replay. */
  replayBatch: 500,
  /**
   * 1 MiB — one event's data, MessagePack-encoded: a larger append is `payload_too_large` and
   * writes nothing. Not a host option: every reader of a log, on any host, must be able to read
   * each of its events in one message.
   */
  maxEventBytes: 1024 * 1024,
  /**
   * 1 MiB — the event data after which an encoded replay array, a log read or a page stops
   * growing; it holds at least one event, so it stays under this plus one event. A follow sends
   * an array as items of `streamItemBytes`.
   */
  eventItemBytes: 1024 * 1024,
  /**
   * 64 KiB — the encoded value of one `events` item of `session.follow` and of one part of a
   * control baseline (protocol-v1 §5): a client hears a socket only in whole messages, so each
   * one must cross a slow link within the client's keepalive wait (at 64 KiB, one every 15 s down
   * to about 4.4 KB/s). A single event (or baseline entry) larger than this goes alone.
   */
  streamItemBytes: 64 * 1024,
  /**
   * @default 32 MiB — stored event data one read of a whole log holds: a `GET /v1/sessions/{id}`
   * or turns-route answer, and an agent's `turn.history()`. A session holding more is
   * `transcript_too_large` there (its log is still read in pages over the mux, `session.page` and
   * `session.follow`, and by an agent with `turn.historyPage()`).
   */
  transcriptViewBytes: 32 * 1024 * 1024,
  /**
   * 32,768 — events a `session.fork` copies at most (the source's seq it forks at): a fork copies
   * its prefix in one transaction of the store's one writer, each event decoded, re-encoded and
   * indexed again, about 16 µs each: a prefix of 309,000 small events under the byte bound held
   * the event loop for 5.1 s, this many about as long as a prefix of 32 MiB of large events.
   */
  maxForkEvents: 32_768,
  /**
   * 10,000 — messages one `session.search` may rank: a search whose words match more messages on
   * the host (of any principal: ranking them is the work, whoever owns them) is
   * `search_too_broad`. Ranking every match held the host's event loop for as long as the
   * host's matching messages took (SQLite answers on it), so one token could stall every socket.
   */
  maxSearchMatches: 10_000,
  /**
   * 3 — the fewest UTF-8 bytes of letters and digits a search's last word ends with for it to match
   * as a prefix (`conf` finds `configure`; `你好`, 6 bytes, finds `你好世界`); a shorter one matches
   * whole words only. Matching a prefix reads every indexed word that starts with those bytes,
   * whatever the bound above: `a` read about a twentieth of the host's whole index. Both indexes
   * keep words as UTF-8, so bytes, not characters, say how many words a prefix reaches.
   */
  searchPrefixMinBytes: 3,
  /** HTTP request bodies. */
  maxHttpBodyBytes: 1024 * 1024,
  /** @default 15 s */
  pingIntervalMs: 15_000,
  /**
   * @default 4 quiet ping intervals (a minute at 15 s) allowed to a peer the host is behind on
   * before it is dropped; a peer owed nothing is dropped at its first.
   */
  backlogGraceIntervals: 4,
  /** @default 4 MiB buffered on a socket before live pushes pause for that follower. */
  followerHighWaterBytes: 4 * 1024 * 1024,
  /** @default 4 MiB buffered on a socket before the host stops reading it and starts no call. */
  sendHighWaterBytes: 4 * 1024 * 1024,
  /** @default 4 calls running at once per socket. */
  maxCallsInFlight: 4,
  /** @default 256 calls waiting per socket; one more is `overloaded`. */
  maxQueuedCalls: 256,
} as const;

export { BEARER_SUBPROTOCOL_PREFIX, SUBPROTOCOL } from "./subprotocol.js";
export const MUX_PATH = "/api/remote.mux";
export const PROTOCOL_VERSION = 1;
