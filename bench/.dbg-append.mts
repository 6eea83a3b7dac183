import { startHost } from "../src/server.js";
import { mkdtempSync } from "node:fs"; import { tmpdir } from "node:os"; import { join } from "node:path";
const dir = mkdtempSync(join(tmpdir(), "dbg-"));
const host = await startHost({ port: 0, host: "127.0.0.1", dbPath: join(dir, "x.db"), tokens: [{ name: "admin", secret: "t", admin: true }] });
await host.store.create({ sessionId: "f", owner: "admin", model: "demo" });
const t0 = performance.now();
for (let done = 0; done < 10000; done += 100) {
  await host.store.append("f", Array.from({ length: 100 }, (_, i) => ({ type: "assistant/delta", data: { turnId: "b", text: `token ${done + i}` } })) as never);
}
console.log("100 appends of 100", performance.now() - t0, process.cpuUsage());
process.exit(0);
