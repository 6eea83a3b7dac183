import { createReadStream, existsSync, statSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { dirname, extname, join, resolve, sep } from "node:path";
import { pipeline } from "node:stream";
import { fileURLToPath } from "node:url";

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".ico": "image/x-icon",
  ".txt": "text/plain; charset=utf-8",
  ".woff": "font/woff",
  ".woff2": "font/woff2",
  ".webmanifest": "application/manifest+json",
};

const NO_BUILD_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sessionmux</title></head>
<body><h1>sessionmux</h1><p>The host is running, but the console is not built. Run <code>npm run build</code>
and restart the host.</p></body></html>
`;

/**
 * The package root: the nearest folder above this module holding `package.json`. Works from
 * `src/transport/http` (run through tsx) and from `dist/src/transport/http` (compiled).
 */
export function packageRoot(from = dirname(fileURLToPath(import.meta.url))): string {
  let dir = from;
  for (;;) {
    if (existsSync(join(dir, "package.json"))) return dir;
    const up = dirname(dir);
    if (up === dir) return from;
    dir = up;
  }
}

export function defaultWebRoot(): string {
  return join(packageRoot(), "dist", "web");
}

/**
 * Serves the built console without auth (the page reads its token from the URL fragment).
 * Returns false when the path is not a file under `root`, so the caller answers 404.
 * Paths with `..` segments (plain or percent-encoded), backslashes or NUL never resolve.
 */
export function serveConsole(
  req: IncomingMessage,
  res: ServerResponse,
  root: string,
  pathname: string,
): boolean {
  const hasBuild = existsSync(join(root, "index.html"));
  if (pathname === "/" || pathname === "/index.html") {
    if (!hasBuild) {
      send(res, req, 200, "text/html; charset=utf-8", Buffer.from(NO_BUILD_PAGE), "no-cache");
      return true;
    }
    return sendFile(req, res, join(root, "index.html"), "no-cache");
  }
  if (!hasBuild) return false;
  let decoded: string;
  try {
    decoded = decodeURIComponent(pathname);
  } catch {
    return false;
  }
  if (decoded.includes("\0") || decoded.includes("\\")) return false;
  const segments = decoded.split("/").filter((s) => s.length > 0);
  if (segments.some((s) => s === ".." || s === "." || s.startsWith("."))) return false;
  const base = resolve(root);
  const file = resolve(base, ...segments);
  if (!file.startsWith(base + sep)) return false;
  const cache = file.endsWith(`${sep}index.html`) ? "no-cache" : cacheFor(segments);
  return sendFile(req, res, file, cache);
}

/** Vite's hashed bundles under `assets/` never change under one name; everything else revalidates. */
function cacheFor(segments: string[]): string {
  return segments[0] === "assets" ? "public, max-age=31536000, immutable" : "no-cache";
}

function sendFile(req: IncomingMessage, res: ServerResponse, file: string, cacheControl: string): boolean {
  let size: number;
  try {
    const st = statSync(file);
    if (!st.isFile()) return false;
    size = st.size;
  } catch {
    return false;
  }
  res.writeHead(200, {
    "content-type": CONTENT_TYPES[extname(file).toLowerCase()] ?? "application/octet-stream",
    "content-length": size,
    "cache-control": cacheControl,
    "x-content-type-options": "nosniff",
  });
  if (req.method === "HEAD") {
    res.end();
    return true;
  }
  // `pipeline`, not `pipe`: a client that goes away mid-download must close the file too; with
  // `pipe` the read stream stayed paused and open, one descriptor per abandoned download
  pipeline(createReadStream(file), res, () => undefined);
  return true;
}

function send(
  res: ServerResponse,
  req: IncomingMessage,
  status: number,
  type: string,
  body: Buffer,
  cache: string,
) {
  res.writeHead(status, { "content-type": type, "content-length": body.length, "cache-control": cache });
  res.end(req.method === "HEAD" ? undefined : body);
}
