import { describe, expect, it, vi } from "vitest";
import type { CommitNotice } from "../../../src/store/session-store.js";
import { pgUrl } from "../contract/backends.js";
import { delta } from "../open-store.js";
import { twoHostsFixture } from "./two-hosts.js";

const S = "s";
/** Two hosts on one fresh schema, closed and the schema dropped after the test. */
const twoHosts = twoHostsFixture("on_close");

// The NOTIFY for other hosts runs in a transaction of its own behind the COMMIT, on the same
// connection. A host closing right after its writers were acknowledged must still have sent it:
// another host's followers wait for that wake-up.
describe.skipIf(!pgUrl)("the NOTIFY behind a commit", () => {
  it("still reaches the other hosts when the writing host closes right after its acknowledgement", async () => {
    const { a, b } = await twoHosts();
    const seqs: number[] = [];
    // B may hear of the session only after A's first append committed: its first events then come
    // with the `create` notice
    b.subscribe(S, (notice: CommitNotice) => {
      if (notice.kind === "create" || notice.kind === "append")
        seqs.push(...notice.events.map((event) => event.seq));
    });
    await a.create({ sessionId: S, owner: "o", model: "m" });
    // the second append runs on the state A kept from the first: the kept-state path
    await a.append(S, [delta("t", "kept")]);
    const outcome = await a.append(S, [delta("t", "last")]);
    expect(outcome).toMatchObject({ status: "appended", events: [{ seq: 3 }] });
    await a.close();
    await vi.waitFor(() => expect(seqs).toEqual([1, 2, 3]), { timeout: 10_000 });
  });

  it("goes out for a batch that took the usual way (reads before its writes)", async () => {
    const { a, b } = await twoHosts();
    const seqs: number[] = [];
    b.subscribe(S, (notice: CommitNotice) => {
      if (notice.kind === "create") seqs.push(...notice.events.map((event) => event.seq));
    });
    expect((await a.create({ sessionId: S, owner: "o", model: "m" })).status).toBe("created");
    await a.close();
    await vi.waitFor(() => expect(seqs).toEqual([1]), { timeout: 10_000 });
  });
});
