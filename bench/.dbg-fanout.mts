import { startHost } from "/work/main/src/server.js";
import { MuxPeer, until } from "/work/main/test/support/mux-peer.js";
import { mkdtempSync } from "node:fs"; import { tmpdir } from "node:os"; import { join } from "node:path";
const dir = mkdtempSync(join(tmpdir(), "dbg-"));
const host = await startHost({ port: 0, host: "127.0.0.1", dbPath: join(dir, "x.db"), tokens: [{ name: "admin", secret: "t", admin: true }] });
const c = await host.store.create({ sessionId: "f", owner: "admin", model: "demo" });
const peers: { p: MuxPeer; id: number }[] = [];
for (let i = 0; i < 100; i++) { const p = await MuxPeer.connect(host.wsUrl, { token: "t", keepEvents: false }); peers.push({ p, id: p.follow("f", { afterSeq: 1 }) }); }
for (const { p, id } of peers) await p.waitItem(id, (i) => i.kind === "caughtUp");
const t0 = performance.now();
for (let done = 0; done < 100000; done += 100) {
  await host.store.append("f", Array.from({ length: 100 }, (_, i) => ({ type: "assistant/delta", data: { turnId: "b", text: `token ${done + i}` } })) as never);
}
console.log("appended", performance.now() - t0);
const timer = setInterval(async () => {
  const seqs = peers.map(({ p, id }) => p.lastSeq(id));
  console.log("min", Math.min(...seqs), "max", Math.max(...seqs), "slow", (await host.metrics.slowFollowers.get()).values[0]?.value, "viol", peers.reduce((a, { p }) => a + p.violations.length, 0));
}, 1000);
await until(() => peers.every(({ p, id }) => p.lastSeq(id) >= 100001), 30000).catch((e) => console.log(String(e)));
clearInterval(timer);
console.log("done", performance.now() - t0);
process.exit(0);
