import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { packageRoot } from "../../../src/transport/http/static-console.js";
import { startTestHost, type TestHost } from "../../support/host.js";
import { tempDir } from "../../support/temp-dir.js";
import { api } from "./http-client.js";

const dir = tempDir();
const webRoot = join(dir.path, "web");
let h: TestHost;
let bare: TestHost;

beforeAll(async () => {
  mkdirSync(join(webRoot, "assets"), { recursive: true });
  writeFileSync(join(webRoot, "index.html"), "<!doctype html><title>console</title>");
  writeFileSync(join(webRoot, "assets", "app-1a2b.js"), "console.log(1)");
  writeFileSync(join(webRoot, "assets", "app-1a2b.css"), "body{}");
  writeFileSync(join(webRoot, "favicon.svg"), "<svg/>");
  writeFileSync(join(webRoot, ".env"), "SECRET=1");
  writeFileSync(join(dir.path, "secret.txt"), "top secret");
  h = await startTestHost({ http: { webRoot } });
  bare = await startTestHost({ http: { webRoot: join(dir.path, "no-build-here") } });
});
afterAll(async () => {
  await h?.dispose();
  await bare?.dispose();
  dir.remove();
});

describe("static console", () => {
  it("serves / as index.html without auth, never cached stale", async () => {
    for (const path of ["/", "/index.html"]) {
      const r = await api(h, path);
      expect(r.status).toBe(200);
      expect(r.headers["content-type"]).toBe("text/html; charset=utf-8");
      expect(r.headers["cache-control"]).toBe("no-cache");
      expect(r.text).toContain("<title>console</title>");
    }
  });

  it("serves assets with their content types", async () => {
    const cases: [string, string][] = [
      ["/assets/app-1a2b.js", "text/javascript; charset=utf-8"],
      ["/assets/app-1a2b.css", "text/css; charset=utf-8"],
      ["/favicon.svg", "image/svg+xml"],
    ];
    for (const [path, type] of cases) {
      const r = await api(h, path);
      expect(r.status, path).toBe(200);
      expect(r.headers["content-type"]).toBe(type);
    }
  });

  it("answers 404 to traversal, encoded traversal, NUL, dot files and missing files", async () => {
    for (const path of [
      "/../secret.txt",
      "/assets/../../secret.txt",
      "/%2e%2e/secret.txt",
      "/%2E%2E%2Fsecret.txt",
      "/assets/%2e%2e/%2e%2e/secret.txt",
      "/..%5csecret.txt",
      "/index.html%00.js",
      "/.env",
      "/missing.js",
      "/assets",
    ]) {
      const r = await api(h, path);
      expect(r.status, path).toBe(404);
      expect(r.text).not.toContain("top secret");
      expect(r.text).not.toContain("SECRET");
    }
  });

  it("without a build, / says how to build the console", async () => {
    const r = await api(bare, "/");
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toMatch(/^text\/html/);
    expect(r.text).toContain("npm run build");
    expect((await api(bare, "/assets/app.js")).status).toBe(404);
  });

  it("finds the package root from the source folder and from the compiled one", () => {
    expect(packageRoot()).toBe(process.cwd());
    expect(packageRoot(join(process.cwd(), "dist", "src", "transport", "http"))).toBe(process.cwd());
  });
});
