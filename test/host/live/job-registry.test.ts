import { describe, expect, it } from "vitest";
import type { Job, NewEvent } from "../../../protocol/index.js";
import { type JobRecorder, JobRegistry } from "../../../src/host/live/job-registry.js";
import { gate } from "../../support/gate.js";

/**
 * Background jobs of a host's sessions: what each change writes, in which order, and what clients
 * are told. The recorder stands for the store (its writes are the store's tests' concern): it
 * records, and the test may make a write fail or hold it.
 */

type Write = string;

class RecordingRecorder implements JobRecorder {
  readonly writes: Write[] = [];
  /** Writes whose text starts with this fail (once each). */
  failing = new Set<string>();
  /** While set, every write waits for it. */
  hold: Promise<void> | undefined;

  async append(sessionId: string, event: NewEvent): Promise<void> {
    await this.#record(`${sessionId} ${event.type} ${JSON.stringify(event.data)}`);
  }

  async progress(jobId: string, progress: number): Promise<void> {
    await this.#record(`progress ${jobId} ${progress}`);
  }

  async #record(write: Write): Promise<void> {
    await this.hold;
    this.writes.push(write);
    for (const prefix of this.failing) {
      if (write.startsWith(prefix)) {
        this.failing.delete(prefix);
        throw new Error(`${write} failed`);
      }
    }
  }
}

function registry() {
  const recorder = new RecordingRecorder();
  const changes: { sessionId: string; jobs: Job[] }[] = [];
  const jobs = new JobRegistry((sessionId, list) => changes.push({ sessionId, jobs: list }), recorder);
  return { recorder, changes, jobs };
}

const states = (list: readonly Job[]) => list.map((job) => `${job.label}:${job.state}:${job.progress}`);

describe("background jobs", () => {
  it("a job writes its start, each progress clamped to 0..1 (not a number: 0), then its end, in order; each change is told", async () => {
    const { recorder, changes, jobs } = registry();
    const job = jobs.start("s1", "alice", "t1", "build");
    const { jobId } = job;
    const reports = [0.5, 2, -1, Number.NaN, Number.POSITIVE_INFINITY];
    for (const value of reports) {
      job.progress(value);
      // each written before the next report: none waits behind another
      await jobs.settled();
    }
    job.complete();
    // an ended job takes no more changes
    job.progress(0.3);
    job.fail();
    await jobs.settled();
    expect(recorder.writes).toEqual([
      `s1 job/started ${JSON.stringify({ jobId, label: "build", turnId: "t1" })}`,
      `progress ${jobId} 0.5`,
      `progress ${jobId} 1`,
      `progress ${jobId} 0`,
      `progress ${jobId} 0`,
      `progress ${jobId} 0`,
      `s1 job/ended ${JSON.stringify({ jobId, state: "completed" })}`,
    ]);
    expect(changes.map((change) => `${change.sessionId} ${states(change.jobs).join(" ")}`)).toEqual([
      "s1 build:running:0",
      "s1 build:running:0.5",
      "s1 build:running:1",
      "s1 build:running:0",
      "s1 build:running:0",
      "s1 build:running:0",
      "s1 build:completed:1",
    ]);
    expect(jobs.jobs("s1")).toEqual([{ jobId, label: "build", progress: 1, state: "completed" }]);
    expect(jobs.hasRunning("s1")).toBe(false);
  });

  it("a failed job ends failed, keeping its progress", async () => {
    const { recorder, jobs } = registry();
    const job = jobs.start("s1", "alice", "t1", "deploy");
    job.progress(0.4);
    job.fail();
    await jobs.settled();
    expect(recorder.writes.at(-1)).toBe(
      `s1 job/ended ${JSON.stringify({ jobId: job.jobId, state: "failed" })}`,
    );
    expect(states(jobs.jobs("s1"))).toEqual(["deploy:failed:0.4"]);
  });

  it("a write waits for the job's write before it, and one that failed does not stop the later ones", async () => {
    const { recorder, jobs } = registry();
    const held = gate();
    recorder.hold = held.promise;
    recorder.failing.add("s1 job/started");
    const job = jobs.start("s1", "alice", "t1", "build");
    job.progress(0.5);
    job.complete();
    let settled = false;
    void jobs.settled().then(() => {
      settled = true;
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(recorder.writes).toEqual([]);
    expect(settled).toBe(false);
    recorder.hold = undefined;
    held.open();
    await jobs.settled();
    expect(settled).toBe(true);
    expect(recorder.writes.map((write) => write.split(" ").slice(0, 2).join(" "))).toEqual([
      "s1 job/started",
      `progress ${job.jobId}`,
      "s1 job/ended",
    ]);
  });

  it("reports made while a progress write waits replace its value: one write waits at most, of the latest", async () => {
    const { recorder, changes, jobs } = registry();
    const started = gate();
    recorder.hold = started.promise;
    const job = jobs.start("s1", "alice", "t1", "index");
    const { jobId } = job;
    for (let i = 1; i <= 1000; i++) job.progress(i / 2000);
    recorder.hold = undefined;
    started.open();
    await jobs.settled();
    // before, a write per report: 1,000 of them, one after another, the job's end behind them all
    expect(recorder.writes.slice(1)).toEqual([`progress ${jobId} 0.5`]);
    // a report made while its write runs gets a write of its own after it
    const writing = gate();
    recorder.hold = writing.promise;
    job.progress(0.6);
    await new Promise((resolve) => setImmediate(resolve));
    job.progress(0.7);
    job.progress(0.8);
    job.complete();
    recorder.hold = undefined;
    writing.open();
    await jobs.settled();
    expect(recorder.writes.slice(2)).toEqual([
      `progress ${jobId} 0.6`,
      `progress ${jobId} 0.8`,
      `s1 job/ended ${JSON.stringify({ jobId, state: "completed" })}`,
    ]);
    // every report is still told as it came
    expect(changes).toHaveLength(1 + 1000 + 3 + 1);
  });

  it("a session shows its twenty newest finished jobs and every running one", async () => {
    const { jobs } = registry();
    const running = jobs.start("s1", "alice", "t1", "long");
    for (let i = 1; i <= 22; i++) jobs.start("s1", "alice", "t1", `j${i}`).complete();
    jobs.start("s2", "alice", "t2", "other").complete();
    expect(jobs.jobs("s1").map((job) => job.label)).toEqual([
      "long",
      ...Array.from({ length: 20 }, (_, i) => `j${i + 3}`),
    ]);
    expect(jobs.hasRunning("s1")).toBe(true);
    running.complete();
    expect(jobs.jobs("s1").map((job) => job.label)).toEqual(
      Array.from({ length: 20 }, (_, i) => `j${i + 3}`),
    );
    expect(jobs.all().map(({ sessionId, jobs: list }) => [sessionId, list.map((job) => job.label)])).toEqual([
      ["s1", Array.from({ length: 20 }, (_, i) => `j${i + 3}`)],
      ["s2", ["other"]],
    ]);
    await jobs.settled();
  });

  it("a detached session's running jobs end with the state given, every job's signal is aborted, and clients are not told", async () => {
    const { recorder, changes, jobs } = registry();
    const done = jobs.start("s1", "alice", "t1", "done");
    done.complete();
    const running = jobs.start("s1", "alice", "t1", "running");
    const elsewhere = jobs.start("s2", "alice", "t2", "elsewhere");
    const told = changes.length;
    jobs.forget("s1", "interrupted");
    expect(changes).toHaveLength(told);
    expect(jobs.jobs("s1")).toEqual([]);
    expect(jobs.hasRunning("s1")).toBe(false);
    expect(done.signal.aborted).toBe(true);
    expect(running.signal.aborted).toBe(true);
    expect((running.signal.reason as Error).message).toBe("session detached");
    expect(elsewhere.signal.aborted).toBe(false);
    await jobs.settled();
    const ends = recorder.writes.filter((write) => write.includes("job/ended"));
    expect(ends).toEqual([
      `s1 job/ended ${JSON.stringify({ jobId: done.jobId, state: "completed" })}`,
      `s1 job/ended ${JSON.stringify({ jobId: running.jobId, state: "interrupted" })}`,
    ]);
    // the handle of a forgotten job changes nothing more
    running.complete();
    await jobs.settled();
    expect(recorder.writes.filter((write) => write.includes("job/ended"))).toHaveLength(2);
    jobs.forget("s1", "cancelled");
    expect(jobs.all().map(({ sessionId }) => sessionId)).toEqual(["s2"]);
  });

  it("starts no job past its session's bound or its owner's, and a job that ends or is forgotten gives its place back", async () => {
    const recorder = new RecordingRecorder();
    const jobs = new JobRegistry(() => undefined, recorder, {
      maxRunningPerSession: 2,
      maxRunningPerOwner: 3,
    });
    const first = jobs.start("s1", "alice", "t1", "a");
    jobs.start("s1", "alice", "t1", "b");
    expect(() => jobs.start("s1", "alice", "t1", "c")).toThrowError(
      expect.objectContaining({ code: "overloaded", data: { limit: "running_jobs_per_session", max: 2 } }),
    );
    jobs.start("s2", "alice", "t2", "d");
    expect(() => jobs.start("s3", "alice", "t3", "e")).toThrowError(
      expect.objectContaining({ code: "overloaded", data: { limit: "running_jobs_per_principal", max: 3 } }),
    );
    // another owner's sessions have places of their own
    jobs.start("s4", "bob", "t4", "f");
    expect(jobs.jobs("s1").map((job) => job.label)).toEqual(["a", "b"]);
    first.complete();
    jobs.start("s1", "alice", "t1", "g");
    jobs.forget("s2", "cancelled");
    jobs.start("s3", "alice", "t3", "h");
    expect(jobs.hasRunning("s2")).toBe(false);
    await jobs.settled();
    // a refused start wrote nothing
    const labels = recorder.writes.flatMap((write) => /"label":"(\w)"/.exec(write)?.[1] ?? []);
    expect(labels).toEqual(["a", "b", "d", "f", "g", "h"]);
  });
});
