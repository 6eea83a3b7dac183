import { mkdirSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, request } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { keptTokenAuthenticate } from "../../src/operations/kept-token-auth.js";
import { startHost } from "../../src/server.js";
import { encodeBearerSubprotocol } from "../../src/transport/auth.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";

const cleanups = cleanupsAfterEach();

type Outcome = "admin" | "refused" | `threw ${string}`;

/** What `authenticate` makes of each request sent to a real HTTP server on 127.0.0.1. */
async function asker(
  authenticate: (req: IncomingMessage) => unknown,
): Promise<(headers: Record<string, string>) => Promise<Outcome>> {
  const outcomeOf = (req: IncomingMessage): Outcome => {
    try {
      const principal = authenticate(req);
      if (principal === undefined) return "refused";
      expect(principal).toEqual({ name: "admin", admin: true });
      return "admin";
    } catch (err) {
      return `threw ${(err as Error).message}`;
    }
  };
  const server = createServer((req, res) => res.end(outcomeOf(req)));
  server.on("upgrade", (req: IncomingMessage, socket) => {
    const body = outcomeOf(req);
    socket.end(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as AddressInfo;
  return (headers) =>
    new Promise((resolve, reject) => {
      const req = request({ host: "127.0.0.1", port, path: "/", headers, agent: false }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          body += chunk;
        });
        res.on("end", () => resolve(body as Outcome));
      });
      req.on("error", reject);
      req.end();
    });
}

function tokenFolder(): ReturnType<typeof tempDir> {
  const dir = tempDir();
  cleanups.push(() => dir.remove());
  return dir;
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const upgrade = (token: string) => ({
  connection: "Upgrade",
  upgrade: "websocket",
  "sec-websocket-protocol": `sessionmux.v1, ${encodeBearerSubprotocol(token)}`,
});

describe("the kept token, re-read when its file changes", () => {
  it("refuses the replaced token once the file changed, even when the new one cannot be read", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const file = dir.file("sessionmux.token");
    writeFileSync(file, "old-token\n", { mode: 0o600 });
    const running = await startHost({
      dbPath: dir.file("sessions.db"),
      port: 0,
      tokens: [],
      authenticate: keptTokenAuthenticate(file),
    });
    cleanups.push(() => running.close());
    const status = async (token: string) =>
      (await fetch(`${running.url}/api/chat/sessions`, { headers: { authorization: `Bearer ${token}` } }))
        .status;
    expect(await status("old-token")).toBe(200);

    // replaced by something that is not a readable file
    rmSync(file);
    mkdirSync(file);
    expect(await status("old-token")).toBe(401);
    expect(await status("old-token")).toBe(401);

    // once a token is readable again, it is the one that passes
    rmSync(file, { recursive: true });
    writeFileSync(file, "new-token\n", { mode: 0o600 });
    expect(await status("old-token")).toBe(401);
    expect(await status("new-token")).toBe(200);
  });
});

describe("the kept token, what passes", () => {
  it("passes the token the file holds as a bearer header, or as the bearer subprotocol of a WebSocket upgrade only", async () => {
    const dir = tokenFolder();
    const file = dir.file("sessionmux.token");
    writeFileSync(file, "  kept-token-1\n", { mode: 0o600 });
    const ask = await asker(keptTokenAuthenticate(file));
    expect(await ask(bearer("kept-token-1"))).toBe("admin");
    expect(await ask(bearer("kept-token-2"))).toBe("refused");
    expect(await ask(bearer("kept-token-"))).toBe("refused");
    // no token at all is refused, not an error
    expect(await ask({})).toBe("refused");
    expect(await ask(upgrade("kept-token-1"))).toBe("admin");
    expect(await ask(upgrade("kept-token-2"))).toBe("refused");
    // the subprotocol counts on an upgrade only
    const { connection: _, upgrade: __, ...plain } = upgrade("kept-token-1");
    expect(await ask(plain)).toBe("refused");
  });

  it("with no file, or one holding only blanks, refuses every token without an error", async () => {
    const dir = tokenFolder();
    const file = dir.file("sessionmux.token");
    const ask = await asker(keptTokenAuthenticate(file));
    expect(await ask(bearer("any-token"))).toBe("refused");
    expect(await ask(upgrade("any-token"))).toBe("refused");
    expect(await ask({})).toBe("refused");
    writeFileSync(file, " \n\t\n", { mode: 0o600 });
    expect(await ask(bearer("any-token"))).toBe("refused");
    expect(await ask({})).toBe("refused");
    // once the file holds a token it passes; gone again, nothing passes
    writeFileSync(file, "kept-token-1\n", { mode: 0o600 });
    expect(await ask(bearer("kept-token-1"))).toBe("admin");
    rmSync(file);
    expect(await ask(bearer("kept-token-1"))).toBe("refused");
  });

  it("refuses a token longer than 4096 characters even when the file holds it", async () => {
    const dir = tokenFolder();
    const longest = dir.file("longest.token");
    const tooLong = dir.file("too-long.token");
    writeFileSync(longest, "a".repeat(4096), { mode: 0o600 });
    writeFileSync(tooLong, "a".repeat(4097), { mode: 0o600 });
    const askLongest = await asker(keptTokenAuthenticate(longest));
    const askTooLong = await asker(keptTokenAuthenticate(tooLong));
    expect(await askLongest(bearer("a".repeat(4096)))).toBe("admin");
    expect(await askTooLong(bearer("a".repeat(4097)))).toBe("refused");
    expect(await askTooLong(upgrade("a".repeat(4097)))).toBe("refused");
  });
});

describe("the kept token, when the file is read", () => {
  it("sees a token rewritten in place with one of the same length, from its new mtime", async () => {
    const dir = tokenFolder();
    const file = dir.file("sessionmux.token");
    writeFileSync(file, "kept-token-1\n", { mode: 0o600 });
    utimesSync(file, 1_700_000_000, 1_700_000_000);
    const ask = await asker(keptTokenAuthenticate(file));
    expect(await ask(bearer("kept-token-1"))).toBe("admin");
    const before = statSync(file, { bigint: true });
    writeFileSync(file, "kept-token-2\n");
    utimesSync(file, 1_700_000_100, 1_700_000_100);
    const after = statSync(file, { bigint: true });
    // the same file (inode) and size: only the mtime tells the change
    expect([after.ino, after.size]).toEqual([before.ino, before.size]);
    expect(await ask(bearer("kept-token-1"))).toBe("refused");
    expect(await ask(bearer("kept-token-2"))).toBe("admin");
  });

  it("reads the file again only when its inode, size or mtime changed, not on every request", async () => {
    const dir = tokenFolder();
    const file = dir.file("sessionmux.token");
    writeFileSync(file, "kept-token-1\n", { mode: 0o600 });
    utimesSync(file, 1_700_000_000, 1_700_000_000);
    const ask = await asker(keptTokenAuthenticate(file));
    expect(await ask(bearer("kept-token-1"))).toBe("admin");
    // other bytes under the same inode, size and mtime: not a change the host looks for
    writeFileSync(file, "kept-token-2\n");
    utimesSync(file, 1_700_000_000, 1_700_000_000);
    expect(await ask(bearer("kept-token-1"))).toBe("admin");
    expect(await ask(bearer("kept-token-2"))).toBe("refused");
    // the mtime moved: read again
    utimesSync(file, 1_700_000_001, 1_700_000_001);
    expect(await ask(bearer("kept-token-2"))).toBe("admin");
    expect(await ask(bearer("kept-token-1"))).toBe("refused");
  });
});
