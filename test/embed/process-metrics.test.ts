import { describe, expect, it } from "vitest";
import { createSessionmux } from "../../src/index.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { gc } from "../support/gc.js";
import { tempDir } from "../support/temp-dir.js";

const cleanups = cleanupsAfterEach();
const tokens = [{ name: "admin", secret: "t", admin: true }];

/** Opens and closes a host in a folder of its own; only a weak reference to its metrics is kept. */
async function openAndClose(processMetrics: boolean): Promise<WeakRef<object>> {
  const dir = tempDir();
  cleanups.push(() => dir.remove());
  const mux = await createSessionmux({ db: dir.file("sessions.db"), tokens, processMetrics });
  const registry = new WeakRef<object>(mux.metrics.registry);
  await mux.close();
  return registry;
}

async function collected(ref: WeakRef<object>): Promise<boolean> {
  // bounded: a registry still referenced stays, and the wait ends with false
  for (let round = 0; round < 20; round++) {
    gc();
    if (ref.deref() === undefined) return true;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return false;
}

describe("process metrics of a mounted host", () => {
  it("leave nothing behind once the host is closed: an app may open and close hosts many times", async () => {
    // the control: a host without process metrics is freed
    expect(await collected(await openAndClose(false))).toBe(true);
    // with them, a GC observer and a loop-delay monitor per host kept its registry for good
    expect(await collected(await openAndClose(true))).toBe(true);
  });

  it("are served by every host in the process, each at its own /metrics", async () => {
    const texts: string[] = [];
    for (let i = 0; i < 2; i++) {
      const dir = tempDir();
      cleanups.push(() => dir.remove());
      const mux = await createSessionmux({ db: dir.file("sessions.db"), tokens });
      cleanups.push(() => mux.close());
      texts.push(await mux.metrics.registry.metrics());
    }
    for (const text of texts) {
      expect(text).toContain("process_resident_memory_bytes");
      expect(text).toContain("nodejs_eventloop_lag_seconds");
      expect(text).toContain("sessionmux_host_info");
    }
  });
});
