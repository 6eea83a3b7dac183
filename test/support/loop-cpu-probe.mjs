// Loaded into a `sessionmux serve` child with `--import`: how much CPU the process spends between
// two turns of its event loop, sampled by a 10 ms timer. Unlike wall-clock event-loop delay, this
// does not grow when other processes take the cores, so it shows what the host itself blocks on.
// SIGUSR2 writes `loop-cpu {"maxMs":…,"p99Ms":…}` to stderr and starts a new window.
const PERIOD_MS = 10;
let last = process.cpuUsage();
let excess = [];

const timer = setInterval(() => {
  const now = process.cpuUsage();
  const cpuMs = (now.user - last.user + now.system - last.system) / 1000;
  last = now;
  // CPU beyond one period: work that ran before this timer could (a timer is late by about that)
  if (excess.length < 100_000) excess.push(Math.max(0, cpuMs - PERIOD_MS));
}, PERIOD_MS);
timer.unref();

process.on("SIGUSR2", () => {
  const sorted = excess.sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  process.stderr.write(`loop-cpu ${JSON.stringify({ maxMs: at(1), p99Ms: at(0.99) })}\n`);
  excess = [];
});
