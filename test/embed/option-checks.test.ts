import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { createSessionmux, type SessionmuxOptions } from "../../src/index.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";

const cleanups = cleanupsAfterEach();

describe("createSessionmux options", () => {
  it("refuses a limit or interval out of its range, naming it, before opening the database", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const db = dir.file("sessions.db");
    const cases: [Partial<SessionmuxOptions>, RegExp][] = [
      // Number(process.env.MAX_BODY) of an unset variable: the body limit was off
      [{ http: { maxBodyBytes: Number.NaN } }, /^http\.maxBodyBytes must be an integer ≥ 1, got NaN$/],
      // every call waited for a slot that never came
      [{ mux: { maxCallsInFlight: 0 } }, /^mux\.maxCallsInFlight must be an integer ≥ 1, got 0$/],
      [{ mux: { maxQueuedCalls: -1 } }, /^mux\.maxQueuedCalls must be an integer ≥ 0, got -1$/],
      [{ mux: { backlogGraceIntervals: 0 } }, /^mux\.backlogGraceIntervals must be an integer ≥ 1, got 0$/],
      // the write-lock check ran in a busy loop
      [{ readinessIntervalMs: 0 }, /^readinessIntervalMs must be an integer from 1 to 2147483647, got 0$/],
      [
        { principals: { sessionCreatePerSecond: 0 } },
        /^principals\.sessionCreatePerSecond must be a finite number above 0, got 0$/,
      ],
      [
        { principals: { maxSocketsPerPrincipal: "64" as unknown as number } },
        /^principals\.maxSocketsPerPrincipal must be an integer ≥ 1, got "64"$/,
      ],
      [
        { authenticateLimits: { timeoutMs: Number.POSITIVE_INFINITY } },
        /^authenticateLimits\.timeoutMs must be an integer from 1 to 2147483647, got Infinity$/,
      ],
      [{ http: 5 as unknown as SessionmuxOptions["http"] }, /^http must be an object, got 5$/],
      // typeof null is "object": reading a limit of it threw a TypeError naming nothing
      [{ mux: null as unknown as SessionmuxOptions["mux"] }, /^mux must be an object, got null$/],
      // a value quoted in full up to 64 characters of JSON, cut after them
      [
        { principals: { maxSocketsPerPrincipal: "x".repeat(62) as unknown as number } },
        new RegExp(`^principals\\.maxSocketsPerPrincipal must be an integer ≥ 1, got "${"x".repeat(62)}"$`),
      ],
      [
        { principals: { maxSocketsPerPrincipal: "y".repeat(100) as unknown as number } },
        new RegExp(`^principals\\.maxSocketsPerPrincipal must be an integer ≥ 1, got "${"y".repeat(63)}…$`),
      ],
      // past 2^31 − 1 ms a Node timer fires after 1 ms: a ping every millisecond, an agent detached at once
      [
        { mux: { pingIntervalMs: 2 ** 31 } },
        /^mux\.pingIntervalMs must be an integer from 1 to 2147483647, got 2147483648$/,
      ],
      [
        { idleDetachMs: 30 * 24 * 3600 * 1000 },
        /^idleDetachMs must be an integer from 1 to 2147483647, got 2592000000$/,
      ],
      [{ leaseTtlMs: 2 ** 31 }, /^leaseTtlMs must be an integer from 1 to 2147483647, got 2147483648$/],
      [
        { turnStopGraceMs: 2 ** 31 },
        /^turnStopGraceMs must be an integer from 0 to 2147483647, got 2147483648$/,
      ],
      [
        { readinessIntervalMs: 2 ** 31 },
        /^readinessIntervalMs must be an integer from 1 to 2147483647, got 2147483648$/,
      ],
      [
        { authenticateLimits: { timeoutMs: 2 ** 31 } },
        /^authenticateLimits\.timeoutMs must be an integer from 1 to 2147483647, got 2147483648$/,
      ],
      // the least values docs/reliability.md gives serve's flags hold for a mounted host too
      [
        { mux: { sendHighWaterBytes: 1023 } },
        /^mux\.sendHighWaterBytes must be an integer ≥ 1024, got 1023$/,
      ],
      [{ http: { sendHighWaterBytes: 1 } }, /^http\.sendHighWaterBytes must be an integer ≥ 1024, got 1$/],
      [
        { http: { maxTranscriptBytes: 1024 * 1024 - 1 } },
        /^http\.maxTranscriptBytes must be an integer ≥ 1048576, got 1048575$/,
      ],
      [{ uploadTtlMs: 999 }, /^uploadTtlMs must be an integer ≥ 1000, got 999$/],
      // 0 refused every prompt naming an attachment; NaN compared false and bounded nothing
      [{ maxTurnAttachmentBytes: 0 }, /^maxTurnAttachmentBytes must be an integer ≥ 1, got 0$/],
      [{ maxTurnAttachmentBytes: Number.NaN }, /^maxTurnAttachmentBytes must be an integer ≥ 1, got NaN$/],
      // PostgreSQL's connection checks: a near busy loop, a healthy connection taken for a silent one
      [{ dbListenCheckMs: 99 }, /^dbListenCheckMs must be an integer from 100 to 2147483647, got 99$/],
      [{ dbQueryCheckMs: Number.NaN }, /^dbQueryCheckMs must be an integer from 100 to 1073741823, got NaN$/],
      // a handshake may take twice it, which a Node timer would fire after 1 ms
      [
        { dbQueryCheckMs: 2 ** 30 },
        /^dbQueryCheckMs must be an integer from 100 to 1073741823, got 1073741824$/,
      ],
      // a NaN decoder limit compared false with every length: strings as long as the frame
      [
        { mux: { decodeLimits: { maxStrBytes: Number.NaN } as never } },
        /^mux\.decodeLimits\.maxStrBytes must be an integer ≥ 1, got NaN$/,
      ],
      [
        { mux: { decodeLimits: { maxDepth: -1 } as never } },
        /^mux\.decodeLimits\.maxDepth must be an integer ≥ 1, got -1$/,
      ],
      [{ mux: { decodeLimits: "64k" as never } }, /^mux\.decodeLimits must be an object, got "64k"$/],
      // no item holds more than about 1,500 events: a larger batch only widened each log read
      [
        { mux: { replayBatch: 1e9 } },
        /^mux\.replayBatch must be an integer from 1 to 10000, got 1000000000$/,
      ],
      [{ mux: { replayBatch: 10_001 } }, /^mux\.replayBatch must be an integer from 1 to 10000, got 10001$/],
      [{ mux: { replayBatch: 0 } }, /^mux\.replayBatch must be an integer from 1 to 10000, got 0$/],
      // a bound of 0 forwarded (or served) no call at all
      [{ callInbox: { maxPending: 0 } }, /^callInbox\.maxPending must be an integer ≥ 1, got 0$/],
      [
        { callInbox: { maxServingBytes: Number.NaN } },
        /^callInbox\.maxServingBytes must be an integer ≥ 1, got NaN$/,
      ],
      [{ callInbox: { maxPendingBytes: -1 } }, /^callInbox\.maxPendingBytes must be an integer ≥ 1, got -1$/],
      // under the forward wait a call still running on its owner was given up before one never
      // claimed; past a timer's longest delay the wait fired at once
      [
        { callInbox: { claimedWaitMs: 4999 } },
        /^callInbox\.claimedWaitMs must be an integer from 5000 to 2147483647, got 4999$/,
      ],
      [
        { callInbox: { claimedWaitMs: 2 ** 31 } },
        /^callInbox\.claimedWaitMs must be an integer from 5000 to 2147483647, got 2147483648$/,
      ],
    ];
    for (const [options, message] of cases) {
      const opening = createSessionmux({
        db,
        tokens: [{ name: "admin", secret: "t", admin: true }],
        ...options,
      });
      opening.then((mux) => cleanups.push(() => mux.close())).catch(() => undefined);
      await expect(opening).rejects.toMatchObject({
        code: "option_invalid",
        message: expect.stringMatching(message),
      });
      expect(existsSync(db)).toBe(false);
    }

    // in range, a fraction where rates take one, each floor itself: the host starts
    const mux = await createSessionmux({
      db,
      tokens: [{ name: "admin", secret: "t", admin: true }],
      principals: { sessionCreatePerSecond: 0.5 },
      mux: {
        maxQueuedCalls: 0,
        replayBatch: 10_000,
        pingIntervalMs: 2 ** 31 - 1,
        sendHighWaterBytes: 1024,
        decodeLimits: { maxStrBytes: 1, maxBinBytes: 1, maxArrayLength: 1, maxMapLength: 1, maxDepth: 1 },
      },
      http: { sendHighWaterBytes: 1024, maxTranscriptBytes: 1024 * 1024 },
      uploadTtlMs: 1000,
      maxTurnAttachmentBytes: 1,
      callInbox: {
        maxPending: 1,
        maxPendingPerPrincipal: 1,
        maxPendingBytes: 1,
        maxReplyBytes: 1,
        maxServing: 1,
        maxServingBytes: 1,
        claimedWaitMs: 5000,
      },
      idleDetachMs: 2 ** 31 - 1,
      turnStopGraceMs: 0,
    });
    cleanups.push(() => mux.close());
    expect(existsSync(db)).toBe(true);
  });

  it("names createSessionmux's options, not serve's flags, when it refuses the database it is given", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const db = dir.file("sessions.db");
    const tokens = [{ name: "app", secret: "app-secret", admin: false }];
    const cases: [Record<string, unknown>, string][] = [
      [
        { db, tokens, dbSchema: "chat" },
        `dbSchema applies to a postgres:// database only (db ${db} is a SQLite file)`,
      ],
      [
        { db: "postgres://app@127.0.0.1:1/", tokens },
        "db postgres://app@127.0.0.1:1/ names no database; add it, e.g. postgres://user@host:5432/sessionmux",
      ],
      [
        { db: "postgres://app@127.0.0.1:1/chat", dbSchema: "Chat", tokens },
        'dbSchema "Chat" is not a schema name (lower case letters, digits and _, at most 63)',
      ],
    ];
    for (const [options, message] of cases) {
      const opening = createSessionmux(options as unknown as SessionmuxOptions);
      opening.then((mux) => cleanups.push(() => mux.close())).catch(() => undefined);
      await expect(opening).rejects.toMatchObject({
        name: "StartupError",
        code: "db_option_invalid",
        message,
      });
      expect(existsSync(db)).toBe(false);
    }
  });

  it("names the hostId option, not serve's --host-id flag, when it refuses a host id", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const db = dir.file("sessions.db");
    const opening = createSessionmux({
      db,
      tokens: [{ name: "app", secret: "app-secret", admin: false }],
      hostId: "edge 1",
    });
    opening.then((mux) => cleanups.push(() => mux.close())).catch(() => undefined);
    await expect(opening).rejects.toMatchObject({
      name: "StartupError",
      code: "host_id_invalid",
      message: `hostId "edge 1": use 1–64 letters, digits, '.', '_' or '-'`,
    });
    expect(existsSync(db)).toBe(false);
  });

  it("refuses an option of an unknown name or the wrong kind, naming it, before opening the database", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const db = dir.file("sessions.db");
    const tokens = [{ name: "app", secret: "app-secret", admin: false }];
    class UserAgent {}
    const cases: [Record<string, unknown>, RegExp][] = [
      // ignored before: the host mounted at the root, under the app's own routes
      [{ db, tokens, basepath: "/chat" }, /^unknown option basepath; createSessionmux takes db, .*basePath/],
      // ignored before: the start then failed with "at least one token is required"
      [{ db, authenticte: () => undefined }, /^unknown option authenticte; /],
      [
        { db },
        /^createSessionmux needs authenticate \(your own auth: .*\) or tokens \(\[\{ name, secret, admin \}\]\)$/,
      ],
      [{ db, tokens: [] }, /^createSessionmux needs authenticate/],
      // the tokens were dropped without a word before: every request they sent was refused 401
      [
        { db, tokens, authenticate: () => undefined },
        /^tokens are not read when authenticate is given \(it decides every request\): look your tokens up in authenticate, with bearerToken\(request\), or leave authenticate out$/,
      ],
      // a TypeError about `paths[0]` from deep inside before
      [{ tokens }, /^db must be a SQLite file path or a postgres:\/\/ URL, got undefined$/],
      [
        { db, authenticate: "yes" },
        /^authenticate must be a function \(request\) => principal \| undefined, got "yes"$/,
      ],
      [
        { db, tokens: "app-secret" },
        /^tokens must be an array of \{ name, secret, admin \}, got "app-secret"$/,
      ],
      // the entry is described, never quoted: it holds a secret
      [
        { db, tokens: ["app-secret"] },
        /^tokens\[0\] must be \{ name: string, secret: string, admin: boolean \}, got a string$/,
      ],
      // the serve flag's wording ("--token alice=…") before
      [
        { db, tokens: [...tokens, { name: "app", secret: "other", admin: false }] },
        /^tokens\[1\]: the name app is used twice$/,
      ],
      [
        { db, tokens: [{ name: "a b", secret: "s", admin: false }] },
        /^tokens\[0\]: a principal name is 1-64/,
      ],
      // "(options.allowedOrigins ?? []).map is not a function" before
      [{ db, tokens, cors: "https://app.example.com" }, /^cors must be an array of origins/],
      // taken before: the app's browser calls were refused forbidden_origin, every one
      [
        { db, tokens, cors: ["app.example.com"] },
        /^cors\[0\]: "app\.example\.com" is no origin: a browser sends /,
      ],
      [
        { db, tokens, cors: ["https://ok.example", "https://app.example.com/"] },
        /^cors\[1\]: "https:\/\/app\.example\.com\/" is no origin: /,
      ],
      // a plain Error without a code before, or (empty) a token no scraper could send
      [{ db, tokens, metricsToken: "scrape me" }, /^metricsToken: a secret holds no whitespace, /],
      [{ db, tokens, metricsToken: "" }, /^metricsToken: a secret is 1-4096 characters$/],
      [
        { db, tokens, metricsToken: "app-secret" },
        /^metricsToken: it must differ from every principal's token$/,
      ],
      // the class instead of an instance: every session.create answered internal_error
      [
        { db, tokens, agent: UserAgent },
        /^agent must be an AgentDriver instance, got the class or function UserAgent: pass new UserAgent\(\)$/,
      ],
      [
        { db, tokens, agent: { name: "mine", models: () => [] } },
        /^agent does not implement AgentDriver: defaultModel, runTurn are missing or of the wrong kind/,
      ],
      [{ db, tokens, logger: console }, /^logger must be a pino logger/],
      // a plain TypeError before, without the code every other bad option has
      [{ db, tokens, basePath: "chat" }, /^basePath must be a path starting with "\/", got "chat"$/],
      [
        { db, tokens, basePath: "/chat?x=1" },
        /^basePath must be a path starting with "\/", got "\/chat\?x=1"$/,
      ],
      [{ db, tokens, createDbFolder: "yes" }, /^createDbFolder must be true or false, got "yes"$/],
      // ignored before: the ping stayed at its default, the socket limit off
      [
        { db, tokens, mux: { pingIntervalMS: 1000 } },
        /^unknown option mux\.pingIntervalMS; mux takes maxPayloadBytes, /,
      ],
      [
        { db, tokens, principals: { maxSockets: 2 } },
        /^unknown option principals\.maxSockets; principals takes maxSocketsPerPrincipal, /,
      ],
      [
        { db, tokens, callInbox: { maxServingCalls: 4 } },
        /^unknown option callInbox\.maxServingCalls; callInbox takes maxPending, /,
      ],
      [
        { db, tokens, mux: { decodeLimits: { maxDepht: 4 } } },
        /^unknown option mux\.decodeLimits\.maxDepht; /,
      ],
      // taken before and replaced by the host's own parts: the app's limits, readiness check and
      // logger were ignored without a word (`principals`, `readinessIntervalMs`, `logger` set them)
      [
        { db, tokens, mux: { principalLimits: { maxSocketsPerPrincipal: 1 } } },
        /^unknown option mux\.principalLimits; mux takes maxPayloadBytes, .*decodeLimits$/,
      ],
      [
        { db, tokens, http: { readiness: () => ({ ready: false, checkedAt: 0 }), logger: console } },
        /^unknown option http\.readiness, http\.logger; http takes maxBodyBytes, .*webRoot$/,
      ],
      [{ db, tokens, http: { uploadLedger: {} } }, /^unknown option http\.uploadLedger; /],
    ];
    for (const [options, message] of cases) {
      const opening = createSessionmux(options as unknown as SessionmuxOptions);
      opening.then((mux) => cleanups.push(() => mux.close())).catch(() => undefined);
      await expect(opening).rejects.toMatchObject({
        name: "StartupError",
        code: "option_invalid",
        message: expect.stringMatching(message),
      });
      expect(existsSync(db)).toBe(false);
    }
  });
});
