import { spawnSync } from "node:child_process";
import { availableParallelism } from "node:os";

/** The follower process's CPU while the servers are pinned, else undefined. */
let followerCpu: number | undefined;

/** The CPU list `pid` may run on (as `taskset` prints it, e.g. "0,1"), or undefined without `taskset`. */
export function cpusOf(pid: number): string | undefined {
  const read = spawnSync("taskset", ["-c", "-p", String(pid)], { encoding: "utf8" });
  return read.status === 0 ? /list:\s*(\S+)/.exec(read.stdout)?.[1] : undefined;
}

/** `taskset` on every thread of `pid`; the CPU list it had before, or undefined if it failed. */
function setAffinity(pid: number, cpus: string): string | undefined {
  const before = cpusOf(pid);
  if (before === undefined) return undefined;
  const set = spawnSync("taskset", ["-a", "-c", "-p", cpus, String(pid)], { stdio: "ignore" });
  return set.status === 0 ? before : undefined;
}

/**
 * Puts this process (the servers, and the processes it forks for them) on CPU 0 and, until the
 * returned function is called, every follower process `pinFollowers` is given on the last CPU
 * (CPU 1 on two cores). On two cores, followers sharing the servers' core made a subject's CPU per
 * delivery move with the scheduler: a server whose followers fall behind finds its writes
 * coalesced and spends less. On one CPU or without `taskset` it does nothing and returns
 * undefined, so a report never calls a scenario pinned that was not.
 */
export function pinServers(): (() => void) | undefined {
  const cpus = availableParallelism();
  const before = cpus >= 2 ? setAffinity(process.pid, "0") : undefined;
  if (before === undefined) return undefined;
  followerCpu = cpus - 1;
  return () => {
    followerCpu = undefined;
    setAffinity(process.pid, before);
  };
}

/** Moves a follower process off the servers' CPU while they are pinned. */
export function pinFollowers(pid: number | undefined): void {
  if (followerCpu !== undefined && pid !== undefined) setAffinity(pid, String(followerCpu));
}
