import { mkdirSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultWebRoot, packageRoot, serveConsole } from "../../../src/transport/http/static-console.js";
import { startTestHost, type TestHost } from "../../support/host.js";
import { tempDir } from "../../support/temp-dir.js";
import { api } from "./http-client.js";

/** One file per kind the console ships, and the content type each is served with. */
const TYPED_FILES: [string, string][] = [
  ["page.html", "text/html; charset=utf-8"],
  ["module.mjs", "text/javascript; charset=utf-8"],
  ["data.json", "application/json; charset=utf-8"],
  ["app.js.map", "application/json; charset=utf-8"],
  ["logo.png", "image/png"],
  ["photo.jpg", "image/jpeg"],
  ["photo2.jpeg", "image/jpeg"],
  ["anim.gif", "image/gif"],
  ["pic.webp", "image/webp"],
  ["favicon.ico", "image/x-icon"],
  ["robots.txt", "text/plain; charset=utf-8"],
  ["font.woff", "font/woff"],
  ["font.woff2", "font/woff2"],
  ["site.webmanifest", "application/manifest+json"],
  ["LOUD.PNG", "image/png"],
  ["blob.bin", "application/octet-stream"],
];

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
  writeFileSync(join(webRoot, "assets", ".hidden"), "SECRET=2");
  mkdirSync(join(webRoot, "docs"));
  writeFileSync(join(webRoot, "assets", "index.html"), "<!doctype html><title>assets</title>");
  writeFileSync(join(webRoot, "docs", "index.html"), "<!doctype html><title>docs</title>");
  writeFileSync(join(webRoot, "a\\b.txt"), "backslash");
  for (const name of TYPED_FILES.map(([file]) => file)) writeFileSync(join(webRoot, name), name);
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
      "/assets/.hidden",
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

  it("serves every kind of file with its content type (by its extension in any case), nosniff", async () => {
    for (const [file, type] of TYPED_FILES) {
      const r = await api(h, `/${file}`);
      expect([file, r.status, r.headers["content-type"]]).toEqual([file, 200, type]);
      expect(r.headers["x-content-type-options"]).toBe("nosniff");
      expect(r.text).toBe(file);
    }
  });

  it("keeps hashed bundles under assets/ for a year, revalidates everything else", async () => {
    const cached = (r: { headers: Record<string, unknown> }) => r.headers["cache-control"];
    expect(cached(await api(h, "/assets/app-1a2b.js"))).toBe("public, max-age=31536000, immutable");
    expect(cached(await api(h, "/favicon.svg"))).toBe("no-cache");
    expect(cached(await api(h, "/docs/index.html"))).toBe("no-cache");
    // a page is never kept, even under assets/
    expect(cached(await api(h, "/assets/index.html"))).toBe("no-cache");
    expect((await api(h, "/docs/index.html")).text).toContain("<title>docs</title>");
  });

  it("answers HEAD with the head of GET and no body", async () => {
    for (const [host, path] of [
      [h, "/assets/app-1a2b.js"],
      [h, "/"],
      [bare, "/"],
    ] as const) {
      const get = await api(host, path);
      const head = await api(host, path, { method: "HEAD" });
      expect([path, head.status, head.body.length]).toEqual([path, 200, 0]);
      expect(head.headers["content-type"]).toBe(get.headers["content-type"]);
      expect(head.headers["content-length"]).toBe(String(get.body.length));
      expect(head.headers["cache-control"]).toBe(get.headers["cache-control"]);
    }
  });

  it("answers 404 to a path that is not percent-encoded right, or holds a backslash", async () => {
    for (const path of ["/%E0%A4%A.js", "/%zz", "/a%5cb.txt"]) {
      const r = await api(h, path);
      expect([path, r.status]).toEqual([path, 404]);
    }
  });

  it("without a build, /index.html says how to build too, never cached", async () => {
    const r = await api(bare, "/index.html");
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(r.headers["cache-control"]).toBe("no-cache");
    expect(r.headers["content-length"]).toBe(String(r.body.length));
    expect(r.text).toContain("npm run build");
  });

  it("finds the package root from the source folder and from the compiled one", () => {
    expect(packageRoot()).toBe(process.cwd());
    expect(packageRoot(join(process.cwd(), "dist", "src", "transport", "http"))).toBe(process.cwd());
    // a folder with no package.json above it is its own root
    const outside = join(dir.path, "outside");
    mkdirSync(outside, { recursive: true });
    expect(packageRoot(outside)).toBe(outside);
  });
});

describe("a console folder without its index.html", () => {
  it("is no build: / says how to build it, and no file in it is served", async () => {
    const root = join(dir.path, "half-built");
    mkdirSync(root, { recursive: true });
    writeFileSync(join(root, "stray.js"), "console.log(2)");
    const server = createServer((req, res) => {
      const pathname = new URL(req.url ?? "/", "http://host.invalid").pathname;
      if (!serveConsole(req, res, root, pathname)) res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const port = (server.address() as AddressInfo).port;
      const page = await fetch(`http://127.0.0.1:${port}/`);
      expect([page.status, await page.text()]).toEqual([200, expect.stringContaining("npm run build")]);
      expect((await fetch(`http://127.0.0.1:${port}/stray.js`)).status).toBe(404);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("is looked for under the package's dist/web by default", () => {
    expect(defaultWebRoot()).toBe(join(process.cwd(), "dist", "web"));
  });
});
