import type { Job, SessionEvent } from "../../../protocol/index.js";
import type { StoredJob } from "../../store/live-state-store.js";
import type { AgentStatusBoard } from "./agent-status.js";

/** Finished jobs of another host's agent kept in view, newest last (as for local ones). */
const FINISHED_KEPT = 20;

/**
 * Agents other hosts run on a shared store, as this host's control stream shows them: status from
 * lease notices (attached on host X, detached) and from their commits (a turn opened: running;
 * closed: idle), jobs from their `job/*` events and progress notices. Everything here comes from
 * the store's notices, in commit order, so a baseline read from it is a cut of them.
 */
export class RemoteAgents {
  readonly #sessions = new Set<string>();
  readonly #jobs = new Map<string, Job[]>();
  readonly #status: AgentStatusBoard;
  readonly #jobsChanged: (sessionId: string, jobs: Job[]) => void;

  constructor(status: AgentStatusBoard, jobsChanged: (sessionId: string, jobs: Job[]) => void) {
    this.#status = status;
    this.#jobsChanged = jobsChanged;
  }

  has(sessionId: string): boolean {
    return this.#sessions.has(sessionId);
  }

  /** The sessions in view. */
  sessions(): string[] {
    return [...this.#sessions];
  }

  /** Another host took the session's lease (`running` when the store shows a turn open). */
  attach(sessionId: string, hostId: string, jobs: readonly StoredJob[] = []): void {
    this.#sessions.add(sessionId);
    if (this.#status.hostOf(sessionId) !== hostId) this.#status.set(sessionId, "attached", hostId);
    if (jobs.length > 0) {
      this.#jobs.set(
        sessionId,
        jobs.map((j) => ({ jobId: j.jobId, label: j.label, progress: j.progress, state: "running" })),
      );
      this.#changed(sessionId);
    }
  }

  /** The lease was released or expired, or this host took it: the remote view ends (no job delta). */
  detach(sessionId: string, announce = true): void {
    if (!this.#sessions.delete(sessionId)) return;
    this.#jobs.delete(sessionId);
    if (announce) this.#status.remove(sessionId);
  }

  committed(sessionId: string, events: readonly SessionEvent[]): void {
    if (!this.#sessions.has(sessionId)) return;
    for (const event of events) {
      if (event.type === "turn/start") this.#status.set(sessionId, "running");
      else if (event.type === "turn/end") this.#status.set(sessionId, "idle");
      else if (event.type === "job/started") {
        const list = this.#jobs.get(sessionId) ?? [];
        list.push({ jobId: event.data.jobId, label: event.data.label, progress: 0, state: "running" });
        this.#jobs.set(sessionId, list);
        this.#changed(sessionId);
      } else if (event.type === "job/ended") {
        this.#update(sessionId, event.data.jobId, { state: event.data.state });
      }
    }
  }

  progress(sessionId: string, jobId: string, progress: number): void {
    if (this.#sessions.has(sessionId)) this.#update(sessionId, jobId, { progress });
  }

  jobs(sessionId: string): Job[] | undefined {
    return this.#jobs.get(sessionId);
  }

  all(): { sessionId: string; jobs: Job[] }[] {
    return [...this.#jobs].map(([sessionId, jobs]) => ({ sessionId, jobs }));
  }

  #update(sessionId: string, jobId: string, patch: Partial<Job>): void {
    const list = this.#jobs.get(sessionId);
    const index = list?.findIndex((j) => j.jobId === jobId) ?? -1;
    if (!list || index < 0) return;
    list[index] = { ...list[index]!, ...patch };
    const finished = list.filter((j) => j.state !== "running");
    if (finished.length > FINISHED_KEPT) list.splice(list.indexOf(finished[0]!), 1);
    this.#changed(sessionId);
  }

  #changed(sessionId: string): void {
    this.#jobsChanged(sessionId, [...(this.#jobs.get(sessionId) ?? [])]);
  }
}
