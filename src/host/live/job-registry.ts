import { randomUUID } from "node:crypto";
import type { Job } from "../../../protocol/index.js";
import type { JobHandle } from "../../agents/agent.js";

/** Finished jobs a session keeps showing, newest last. */
const FINISHED_KEPT = 20;

interface Entry {
  job: Job;
  readonly abort: AbortController;
}

/**
 * Background jobs per session. A job may outlive its turn; it is cancelled (its signal aborted)
 * when the session detaches. Every change reports the session's complete job list.
 */
export class JobRegistry {
  readonly #jobs = new Map<string, Entry[]>();
  readonly #onChange: (sessionId: string, jobs: Job[]) => void;

  constructor(onChange: (sessionId: string, jobs: Job[]) => void) {
    this.#onChange = onChange;
  }

  start(sessionId: string, label: string): JobHandle {
    const entry: Entry = {
      job: { jobId: randomUUID(), label, progress: 0, state: "running" },
      abort: new AbortController(),
    };
    const list = this.#jobs.get(sessionId) ?? [];
    list.push(entry);
    this.#jobs.set(sessionId, list);
    this.#changed(sessionId);
    const update = (patch: Partial<Job>) => {
      if (entry.job.state !== "running") return;
      entry.job = { ...entry.job, ...patch };
      if (entry.job.state !== "running") this.#trim(sessionId);
      this.#changed(sessionId);
    };
    return {
      jobId: entry.job.jobId,
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
    return (this.#jobs.get(sessionId) ?? []).some((e) => e.job.state === "running");
  }

  /** Cancels a detached session's jobs without a delta: `detached` already tells clients. */
  forget(sessionId: string): void {
    const list = this.#jobs.get(sessionId) ?? [];
    this.#jobs.delete(sessionId);
    for (const e of list) {
      if (e.job.state === "running") e.job = { ...e.job, state: "cancelled" };
      e.abort.abort(new Error("session detached"));
    }
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
