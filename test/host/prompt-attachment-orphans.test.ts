import { afterEach, describe, expect, test, vi } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { ADMIN } from "../../src/host/principal.js";
import {
  beforeAppend,
  errorCode,
  type HostFixture,
  openHost,
  readLog,
  recordedFirstElsewhere,
  storedAttachments as storedAttachmentsIn,
} from "./host-fixture.js";

/**
 * A prompt's inline bytes are kept before its turn's opening append; when that append does not
 * commit, no attachment row, chunk or stored byte of them is left behind.
 */

let fx: HostFixture;
afterEach(async () => fx?.dispose());

const S = "with-files";

const INLINE = [
  { name: "a.bin", type: "application/octet-stream", bytes: new Uint8Array([1, 2, 3, 4]) },
  { name: "b.txt", type: "", url: "data:text/plain;base64,aGVsbG8=" },
];

function prompt(clientMessageId: string) {
  return fx.host.call(ADMIN, "session.prompt", {
    sessionId: S,
    text: "see the files",
    clientMessageId,
    attachments: INLINE,
  });
}

function storedAttachments(): { rows: number; chunks: number } {
  return storedAttachmentsIn(fx.dbPath);
}

async function opened(): Promise<void> {
  fx = await openHost();
  await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
}

describe("inline bytes of a prompt whose turn does not open", () => {
  test("a prompt that loses its clientMessageId to another writer keeps none of its bytes", async () => {
    await opened();
    const other = "other-writer-turn";
    let withoutLoser: number | undefined;
    const raced = recordedFirstElsewhere(fx.store, S, "raced", other, async () => {
      // the loser's bytes are in by now: the race is the one this guards
      expect(storedAttachments().rows).toBe(2);
      withoutLoser = (await fx.store.ownerStoredBytes("admin")) - 9;
    });
    expect(await prompt("raced")).toMatchObject({ queued: false, turnId: other });
    expect(raced.ran).toBe(true);
    expect(storedAttachments()).toEqual({ rows: 0, chunks: 0 });
    expect(await fx.store.ownerStoredBytes("admin")).toBe(withoutLoser);
  });

  test("a prompt whose session is deleted before its turn opens is refused and keeps none of its bytes", async () => {
    await opened();
    beforeAppend(
      fx.store,
      (_events, options) => options?.prompt?.clientMessageId === "late",
      async () => {
        expect((await fx.store.delete(S)).status).toBe("deleted");
      },
    );
    expect((await errorCode(() => prompt("late"))).code).toBe("session_retired");
    expect(storedAttachments()).toEqual({ rows: 0, chunks: 0 });
    expect(await fx.store.ownerStoredBytes("admin")).toBe(0);
  });

  test("a prompt whose append the store refuses as fenced (the lease lost) keeps none of its bytes", async () => {
    await opened();
    vi.spyOn(fx.store, "append").mockResolvedValueOnce({ status: "fenced" });
    expect((await errorCode(() => prompt("fenced"))).code).not.toBe("succeeded");
    expect(storedAttachments()).toEqual({ rows: 0, chunks: 0 });
    // the session goes on: the next prompt keeps its bytes with its message
    vi.restoreAllMocks();
    const r = await prompt("next");
    expect(r.turnId).toEqual(expect.any(String));
    expect(storedAttachments().rows).toBe(2);
    const message = (await readLog(fx.store, S)).find((e) => e.type === "user/message");
    expect(message?.type === "user/message" && message.data.attachments.map((a) => a.size)).toEqual([4, 5]);
  });

  test("a prompt whose second file fails to be kept gives back the first", async () => {
    await opened();
    const put = fx.store.putAttachment.bind(fx.store);
    vi.spyOn(fx.store, "putAttachment")
      .mockImplementationOnce(put)
      .mockRejectedValueOnce(new SessionmuxError("persistence_failure", "disk full"));
    expect((await errorCode(() => prompt("half"))).code).toBe("persistence_failure");
    expect(storedAttachments()).toEqual({ rows: 0, chunks: 0 });
  });
});
