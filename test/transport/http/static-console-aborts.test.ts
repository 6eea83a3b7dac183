import { mkdirSync, readdirSync, readlinkSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { describe, it } from "vitest";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { startTestHost } from "../../support/host.js";
import { tempDir } from "../../support/temp-dir.js";
import { until } from "../../support/until.js";

const cleanups = cleanupsAfterEach();

/** This process's descriptors open on `file`. */
function openOn(file: string): number {
  let count = 0;
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`) === file) count++;
    } catch {
      // closed meanwhile
    }
  }
  return count;
}

/** Asks for `path` on a raw socket and cuts it once the answer's head has come. */
function abortAfterHead(port: number, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => {
      socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    });
    socket.once("data", () => {
      socket.destroy();
      resolve();
    });
    socket.once("error", reject);
  });
}

describe.skipIf(process.platform !== "linux")("static console, downloads cut short", () => {
  it("closes the file of every download its client abandoned", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const webRoot = join(dir.path, "web");
    mkdirSync(join(webRoot, "assets"), { recursive: true });
    writeFileSync(join(webRoot, "index.html"), "<!doctype html><title>console</title>");
    // a source map of a few MiB: far more than one read, so the download is under way when cut
    const big = join(webRoot, "assets", "app-1a2b.js.map");
    writeFileSync(big, Buffer.alloc(8 * 1024 * 1024, 0x61));
    const host = await startTestHost({ http: { webRoot } });
    cleanups.push(() => host.dispose());

    for (let i = 0; i < 10; i++) await abortAfterHead(host.port, "/assets/app-1a2b.js.map");
    // each abandoned download kept its descriptor open for good, until the process ran out
    await until(() => openOn(big) === 0, 5_000, "the abandoned downloads' files to be closed");
  });
});
