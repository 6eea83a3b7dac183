import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import type Database from "better-sqlite3";
import { SessionmuxError } from "../../protocol/index.js";
import { FairTurns, type ReadAsker } from "./fair-turns.js";
import { indexedForm } from "./indexed-word.js";
import { SEARCH_VOCABULARY_SQL } from "./search-prefix-words.js";
import { snippetOf } from "./search-snippet.js";
import { storeClosed } from "./store-closed.js";

/** How a statement's answer is taken: one row, every row, or one row's single column. */
export type ReadMode = "get" | "all" | "pluck";

interface Call {
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

interface Answer {
  id: number;
  value?: unknown;
  error?: { message: string; code?: string };
}

/**
 * The thread's program. It is plain CommonJS handed to the worker as text, so the same code runs
 * from the sources (TypeScript, under a loader the worker would not have) and from the build.
 * Statements are prepared once per text on the thread's own read-only connection; an answer
 * carries the SQLite error's code, so a storage failure stays one. `search_snippet` is the
 * function `registerSearchSnippet` gives the store's own connection, built from the source text
 * of the same functions (each names nothing outside itself), and `search_vocab` the table
 * `registerSearchVocabulary` gives it.
 */
const PROGRAM = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.path, { readonly: true, fileMustExist: true });
db.pragma("busy_timeout = 5000");
const snippetOf = ${snippetOf};
const indexedForm = ${indexedForm};
db.function("search_snippet", { deterministic: true }, (text, terms) =>
  snippetOf(String(text), JSON.parse(String(terms)), indexedForm),
);
db.exec(${JSON.stringify(SEARCH_VOCABULARY_SQL)});
const prepared = new Map();
parentPort.on("message", ({ id, sql, mode, params }) => {
  try {
    let statement = prepared.get(sql);
    if (!statement) {
      statement = db.prepare(sql);
      if (mode === "pluck") statement.pluck();
      prepared.set(sql, statement);
    }
    const value = mode === "all" ? statement.all(...params) : statement.get(...params);
    parentPort.postMessage({ id, value });
  } catch (error) {
    parentPort.postMessage({ id, error: { message: String(error && error.message), code: error && error.code } });
  }
});
`;

/** Reads waiting on or running in the thread at once; past it `overloaded`. */
export const MAX_THREAD_READS = 64;

/** The asker of a read that names none: the host's own reads, in one line of their own. */
const UNNAMED: ReadAsker = { name: "" };

/**
 * A read-only connection to the store's file on a thread of its own, for reads whose cost a
 * client decides (a search ranks up to `Limits.maxSearchMatches` messages): run there, they never
 * hold up the event loop that serves every other client's streams. WAL lets it read beside the
 * writer; each read is its own transaction, so it sees every write acknowledged before it was
 * asked. Started at the first read; a thread that dies fails its reads and the next read starts
 * another. The thread is given one read at a time, taken in turns across the principals that asked
 * (see `FairTurns`): in the order they arrived, one principal's 64 broad searches (0.1–0.4 s each
 * on 300,000 messages) made another's one-hit search wait 9–13 s; a read whose caller left while it
 * waited is never sent.
 */
export class SqliteReadThread {
  #worker: Worker | undefined;
  #next = 0;
  readonly #calls = new Map<number, Call>();
  readonly #turns = new FairTurns(1);
  #closed = false;
  #started = 0;
  #ran = 0;

  constructor(
    private readonly path: string,
    private readonly maxReads = MAX_THREAD_READS,
  ) {}

  /** Threads started so far: one, unless one died. */
  get started(): number {
    return this.#started;
  }

  /** Reads sent to the thread so far (a read dropped while it waited is not). */
  get ran(): number {
    return this.#ran;
  }

  /**
   * Runs a statement of the store's own connection, by its text, on the thread, once `asker`'s
   * turn comes; fails `aborted`, never sent, if its signal fires first.
   */
  run<T>(
    statement: Database.Statement,
    mode: ReadMode,
    params: readonly unknown[],
    asker: ReadAsker = UNNAMED,
  ): Promise<T> {
    if (this.#closed) return Promise.reject(storeClosed());
    if (this.#calls.size + this.#turns.waiting >= this.maxReads) {
      return Promise.reject(
        new SessionmuxError("overloaded", `this host already runs ${this.maxReads} searches; retry shortly`, {
          data: { max: this.maxReads },
        }),
      );
    }
    return this.#turns.run(asker, () => this.#send<T>(statement, mode, params));
  }

  #send<T>(statement: Database.Statement, mode: ReadMode, params: readonly unknown[]): Promise<T> {
    if (this.#closed) return Promise.reject(storeClosed());
    const worker = this.#start();
    const id = this.#next++;
    this.#ran++;
    return new Promise<T>((resolve, reject) => {
      this.#calls.set(id, { resolve: resolve as (value: unknown) => void, reject });
      worker.ref();
      try {
        worker.postMessage({ id, sql: statement.source, mode, params });
      } catch (err) {
        // a parameter the thread cannot be sent: this read fails alone, and holds nothing
        this.#answer({ id, error: { message: err instanceof Error ? err.message : String(err) } });
      }
    });
  }

  /** Stops the thread (its connection with it); reads still waiting fail as on a closed store. */
  async close(): Promise<void> {
    this.#closed = true;
    const worker = this.#worker;
    this.#worker = undefined;
    this.#failAll(storeClosed());
    await worker?.terminate();
  }

  #start(): Worker {
    if (this.#worker) return this.#worker;
    const driver = createRequire(import.meta.url).resolve("better-sqlite3");
    const worker = new Worker(PROGRAM, {
      eval: true,
      workerData: { path: this.path, driver },
    });
    this.#started++;
    worker.on("message", (answer: Answer) => this.#answer(answer));
    const lost = (err: unknown) => {
      if (this.#worker !== worker) return;
      this.#worker = undefined;
      this.#failAll(threadError(err));
    };
    worker.on("error", lost);
    worker.on("exit", (code) => lost(new Error(`the read thread exited with code ${code}`)));
    worker.unref();
    this.#worker = worker;
    return worker;
  }

  #answer({ id, value, error }: Answer): void {
    const call = this.#calls.get(id);
    if (!call) return;
    this.#calls.delete(id);
    // idle, the thread keeps no process alive
    if (this.#calls.size === 0) this.#worker?.unref();
    if (!error) call.resolve(value);
    else call.reject(Object.assign(new Error(error.message), error.code ? { code: error.code } : {}));
  }

  #failAll(err: unknown): void {
    const calls = [...this.#calls.values()];
    this.#calls.clear();
    for (const call of calls) call.reject(err);
  }
}

/**
 * What the thread failed with, as an error of this thread: an error thrown there may arrive as a
 * plain object (a SQLite error's class does not cross), whose message and code are kept.
 */
function threadError(err: unknown): Error {
  if (err instanceof Error) return err;
  const { message, code } = (err ?? {}) as { message?: unknown; code?: unknown };
  const why = typeof message === "string" ? message : typeof code === "string" ? code : String(err);
  const error = new Error(`the read thread stopped: ${why}`);
  return typeof code === "string" ? Object.assign(error, { code }) : error;
}
