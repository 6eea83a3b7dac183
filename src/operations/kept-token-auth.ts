import { createHash, timingSafeEqual } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import type { IncomingMessage } from "node:http";
import { ADMIN, type Principal } from "../host/principal.js";
import { Authenticator } from "../transport/auth.js";

/**
 * Authenticates with the admin token kept in `file`, re-read whenever the file changes, so
 * `sessionmux token rotate` takes effect on a running host: the old token is refused from the
 * next request on (open sockets stay open until they reconnect).
 */
export function keptTokenAuthenticate(file: string): (req: IncomingMessage) => Principal | undefined {
  let seen = "";
  let digest: Buffer = Buffer.alloc(0);
  const current = (): Buffer => {
    const stat = statSync(file, { bigint: true, throwIfNoEntry: false });
    // the inode a rename brings, size and mtime down to the nanosecond
    const version = stat ? `${stat.ino}:${stat.size}:${stat.mtimeNs}` : "";
    if (version !== seen) {
      // Until the new file is read, no token passes: a read that failed (a folder in its place,
      // the file gone between stat and read) kept the replaced token working, as the version
      // was taken for read.
      seen = "";
      digest = Buffer.alloc(0);
      const token = stat ? readFileSync(file, "utf8").trim() : "";
      digest = token.length > 0 ? sha256(token) : Buffer.alloc(0);
      seen = version;
    }
    return digest;
  };
  return (req) => {
    const expected = current();
    const given = Authenticator.tokenOf(req, { allowSubprotocol: req.headers.upgrade !== undefined });
    if (expected.length === 0 || given === undefined || given.length === 0 || given.length > 4096)
      return undefined;
    return timingSafeEqual(sha256(given), expected) ? ADMIN : undefined;
  };
}

function sha256(value: string): Buffer {
  return createHash("sha256").update(value, "utf8").digest();
}
