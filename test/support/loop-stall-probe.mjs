// Loaded into a `sessionmux serve` child with `--import`: how long its event loop goes without
// coming back to timers, sampled every millisecond, two ways.
// - wall: `monitorEventLoopDelay` at 1 ms resolution. Node records the whole interval between two
//   runs of its timer (at least the resolution), so the resolution is taken off: what is left is
//   the delay beyond the sampling interval. It also counts time other processes kept the host off
//   the cores.
// - CPU: the main thread's own CPU time (`/proc/self/task/<pid>/schedstat`, nanoseconds) between
//   two ticks of a 1 ms timer. It does not grow while the thread waits for a core, nor with the
//   CPU of other threads (GC helpers, the thread pool), so it shows what the host itself blocks on.
// SIGUSR2 writes `loop-stall {…}` to stderr: the window's figures, then the bytes the process
// holds after a full collection (V8 heap in use plus Buffers and other memory outside it; the host
// runs with `--expose-gc`), unlike resident memory, which also counts garbage not yet collected.
// The collection runs between two windows, so neither counts its pause.
import { openSync, readSync } from "node:fs";
import { monitorEventLoopDelay } from "node:perf_hooks";

const RESOLUTION_MS = 1;
const MAX_SAMPLES = 600_000;

const wall = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
wall.enable();

const schedstat = openSync(`/proc/self/task/${process.pid}/schedstat`, "r");
const text = Buffer.alloc(128);
const threadCpuNs = () => {
  const n = readSync(schedstat, text, 0, text.length, 0);
  return Number(text.toString("latin1", 0, n).split(" ", 1)[0]);
};

let last = threadCpuNs();
const cpu = new Float64Array(MAX_SAMPLES);
let samples = 0;
const timer = setInterval(() => {
  const now = threadCpuNs();
  if (samples < MAX_SAMPLES) cpu[samples++] = (now - last) / 1e6;
  last = now;
}, RESOLUTION_MS);
timer.unref();

const beyondInterval = (ns) => Math.max(0, ns / 1e6 - RESOLUTION_MS);

process.on("SIGUSR2", () => {
  // sorted in place: the window's samples are discarded after this report
  const sorted = cpu.subarray(0, samples).sort();
  const at = (q) => sorted[Math.min(samples - 1, Math.floor(q * samples))] ?? 0;
  const report = {
    wallMaxMs: beyondInterval(wall.max),
    wallP99Ms: beyondInterval(wall.percentile(99)),
    cpuMaxMs: at(1),
    cpuP99Ms: at(0.99),
    samples,
  };
  // Twice: the Buffers one collection finds dead are freed only by the next one, so after a single
  // collection `external` still counted megabytes of garbage (a 10 MiB upload's, at random), which
  // swung the held growth of one and the same attack between -15 and +8.6 MiB.
  globalThis.gc?.();
  globalThis.gc?.();
  const memory = process.memoryUsage();
  report.heldBytes = memory.heapUsed + memory.external;
  process.stderr.write(`loop-stall ${JSON.stringify(report)}\n`);
  wall.reset();
  samples = 0;
  last = threadCpuNs();
});
