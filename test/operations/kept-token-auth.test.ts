import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { keptTokenAuthenticate } from "../../src/operations/kept-token-auth.js";
import { startHost } from "../../src/server.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";

const cleanups = cleanupsAfterEach();

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
