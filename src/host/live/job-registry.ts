import { randomUUID } from "node:crypto";
import { type Job, type NewEvent, SessionmuxError } from "../../../protocol/index.js";
import type { JobHandle } from "../../agents/agent.js";
import { CountsByKey } from "../../store/counts-by-key.js";

/** Finished jobs a session keeps showing, newest last. */
const FINISHED_KEPT = 20;

/** Running jobs one session may hold at once (`maxRunningPerSession`). */
export const DEFAULT_MAX_RUNNING_JOBS_PER_SESSION = 64;
/** Running jobs one principal's sessions may hold at once on a host (`maxRunningPerOwner`). */
export const DEFAULT_MAX_RUNNING_JOBS_PER_PRINCIPAL = 1_000;

/**
 * Bounds of the running jobs. A job outlives its turn, so a principal prompting `/job 600` (or an
 * agent starting jobs in a loop) would otherwise hold every job it started for their whole run:
 * memory per job, and every change of a job sends its session's whole list to control readers.
 */
export interface JobLimits {
  /** @default 64 */
  maxRunningPerSession: number;
  /** @default 1,000 (by the sessions' owner, admin too) */
  maxRunningPerOwner: number;
}

interface Entry {
  job: Job;
  readonly owner: string;
  readonly abort: AbortController;
  /** The job's writes, in order: `job/started`, progress, `job/ended`. */
  written: Promise<void>;
  /**
   * The progress a queued write will store, set while that write waits for the ones before it: a
   * later report replaces it, so a job reporting faster than the store writes waits on one write,
   * not on one per report (its `job/ended` behind them all, and a shutdown waiting for them).
   */
  unwritten?: number;
}

/** Where a job's changes are made durable (the log for start and end, a row for progress). */
export interface JobRecorder {
  append(sessionId: string, event: NewEvent): Promise<void>;
  progress(jobId: string, progress: number): Promise<void>;
}

/**
 * Background jobs per session. A job may outlive its turn; it is cancelled (its signal aborted)
 * when the session detaches. Its start and end are log events (`job/started`, `job/ended`) and its
 * progress a store row, so a job running when the host stops or crashes ends `interrupted`; the
 * AbortControllers are the process-local part. Every change reports the session's job list.
 */
export class JobRegistry {
  readonly #jobs = new Map<string, Entry[]>();
  readonly #onChange: (sessionId: string, jobs: Job[]) => void;
  readonly #recorder: JobRecorder;
  readonly #writes = new Set<Promise<void>>();
  readonly #limits: JobLimits;
  /** Running jobs by session and by owner; an entry goes once its count is 0. */
  readonly #runningBySession = new CountsByKey();
  readonly #runningByOwner = new CountsByKey();

  constructor(
    onChange: (sessionId: string, jobs: Job[]) => void,
    recorder: JobRecorder,
    limits: Partial<JobLimits> = {},
  ) {
    this.#onChange = onChange;
    this.#recorder = recorder;
    this.#limits = {
      maxRunningPerSession: limits.maxRunningPerSession ?? DEFAULT_MAX_RUNNING_JOBS_PER_SESSION,
      maxRunningPerOwner: limits.maxRunningPerOwner ?? DEFAULT_MAX_RUNNING_JOBS_PER_PRINCIPAL,
    };
  }

  /**
   * Starts a job of `owner`'s session. Past a bound it throws `overloaded` (retryable: a job that
   * ends makes room), `data: {limit, max}`, and starts and records nothing.
   */
  start(sessionId: string, owner: string, turnId: string, label: string): JobHandle {
    this.#admit(sessionId, owner);
    const jobId = randomUUID();
    const entry: Entry = {
      job: { jobId, label, progress: 0, state: "running" },
      owner,
      abort: new AbortController(),
      written: Promise.resolve(),
    };
    this.#runningBySession.add(sessionId);
    this.#runningByOwner.add(owner);
    this.#write(entry, () =>
      this.#recorder.append(sessionId, { type: "job/started", data: { jobId, label, turnId } }),
    );
    const list = this.#jobs.get(sessionId) ?? [];
    list.push(entry);
    this.#jobs.set(sessionId, list);
    this.#changed(sessionId);
    const update = (patch: Partial<Job>) => {
      if (entry.job.state !== "running") return;
      entry.job = { ...entry.job, ...patch };
      if (entry.job.state !== "running") {
        this.#stopped(sessionId, entry);
        this.#end(sessionId, entry);
        this.#trim(sessionId);
      } else if (patch.progress !== undefined) {
        const queued = entry.unwritten !== undefined;
        entry.unwritten = patch.progress;
        if (!queued)
          this.#write(entry, () => {
            const progress = entry.unwritten ?? entry.job.progress;
            entry.unwritten = undefined;
            return this.#recorder.progress(jobId, progress);
          });
      }
      this.#changed(sessionId);
    };
    return {
      jobId,
      signal: entry.abort.signal,
      progress: (value) => update({ progress: clamp(value) }),
      complete: () => update({ progress: 1, state: "completed" }),
      fail: () => update({ state: "failed" }),
    };
  }

  jobs(sessionId: string): Job[] {
    return (this.#jobs.get(sessionId) ?? []).map((e) => e.job);
  }

  all(): { sessionId: string; jobs: Job[] }[] {
    return [...this.#jobs].map(([sessionId, list]) => ({ sessionId, jobs: list.map((e) => e.job) }));
  }

  hasRunning(sessionId: string): boolean {
    return this.#runningBySession.has(sessionId);
  }

  /**
   * Ends a detached session's running jobs (`cancelled`, or `interrupted` when the host stops)
   * without a delta: `detached` already tells clients. Their `job/ended` is still recorded.
   */
  forget(sessionId: string, state: "cancelled" | "interrupted"): void {
    const list = this.#jobs.get(sessionId) ?? [];
    this.#jobs.delete(sessionId);
    for (const e of list) {
      if (e.job.state === "running") {
        e.job = { ...e.job, state };
        this.#stopped(sessionId, e);
        this.#end(sessionId, e);
      }
      e.abort.abort(new Error("session detached"));
    }
  }

  /** Settles once every job write issued so far has settled (shutdown waits for it). */
  async settled(): Promise<void> {
    await Promise.all([...this.#writes]);
  }

  #admit(sessionId: string, owner: string): void {
    const { maxRunningPerSession, maxRunningPerOwner } = this.#limits;
    if (this.#runningBySession.get(sessionId) >= maxRunningPerSession) {
      throw new SessionmuxError(
        "overloaded",
        `session ${sessionId} already runs ${maxRunningPerSession} jobs; start another once one has ended`,
        { data: { limit: "running_jobs_per_session", max: maxRunningPerSession } },
      );
    }
    if (this.#runningByOwner.get(owner) >= maxRunningPerOwner) {
      throw new SessionmuxError(
        "overloaded",
        `${owner}'s sessions already run ${maxRunningPerOwner} jobs on this host; start another once one has ended`,
        { data: { limit: "running_jobs_per_principal", max: maxRunningPerOwner } },
      );
    }
  }

  /** A job left `running`: its places are given back. */
  #stopped(sessionId: string, entry: Entry): void {
    this.#runningBySession.add(sessionId, -1);
    this.#runningByOwner.add(entry.owner, -1);
  }

  #end(sessionId: string, entry: Entry): void {
    const { jobId, state } = entry.job;
    if (state === "running") return;
    this.#write(entry, () => this.#recorder.append(sessionId, { type: "job/ended", data: { jobId, state } }));
  }

  #write(entry: Entry, run: () => Promise<void>): void {
    // a failed write (a deleted session, a full disk) must not stop the job's later writes
    const next = entry.written.then(run).catch(() => undefined);
    entry.written = next;
    this.#writes.add(next);
    void next.then(() => this.#writes.delete(next));
  }

  #trim(sessionId: string): void {
    const list = this.#jobs.get(sessionId);
    if (!list) return;
    const finished = list.filter((e) => e.job.state !== "running");
    const excess = finished.length - FINISHED_KEPT;
    if (excess > 0) {
      const drop = new Set(finished.slice(0, excess));
      this.#jobs.set(
        sessionId,
        list.filter((e) => !drop.has(e)),
      );
    }
  }

  #changed(sessionId: string): void {
    this.#onChange(sessionId, this.jobs(sessionId));
  }
}

function clamp(value: number): number {
  if (!Number.isFinite(value)) return 0;
  return Math.min(1, Math.max(0, value));
}
