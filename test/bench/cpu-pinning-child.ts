/**
 * Runs `pinServers` in a process of its own (it pins every thread of the process it runs in) and
 * prints the CPU lists it saw, for cpu-pinning.test.ts.
 */
import { spawn } from "node:child_process";
import { cpusOf, pinFollowers, pinServers } from "../../bench/harness/cpu-pinning.js";

const follower = () => spawn("sleep", ["30"], { stdio: "ignore" });

const before = cpusOf(process.pid);
const unpin = pinServers();
const first = follower();
pinFollowers(first.pid);
const pinned = { self: cpusOf(process.pid), follower: cpusOf(first.pid!) };
unpin?.();
const second = follower();
pinFollowers(second.pid);
const after = { self: cpusOf(process.pid), follower: cpusOf(second.pid!) };
first.kill();
second.kill();
process.stdout.write(JSON.stringify({ applied: unpin !== undefined, before, pinned, after }));
