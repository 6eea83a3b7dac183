import { createHash } from "node:crypto";
import { expect, it } from "vitest";
import { Limits, SessionmuxError } from "../../../protocol/index.js";
import { SEARCH_CHUNK_UNITS } from "../../../src/store/postgres/pg-search-chunks.js";
import { RANKED_TEXT_BUDGET } from "../../../src/store/search-rank-budget.js";
import { UNDO_PG_LOG_KEYS } from "../../support/purge-migration.js";
import { delta, turnEnd, turnStart, userMessage } from "../open-store.js";
import { describeContract, type Opener, storeFixture } from "./backends.js";
import { tamper } from "./operator-hand.js";

/** The PostgreSQL migration that reads ASCII punctuation in indexed text as a space. */
const PUNCTUATION_MIGRATION = 13;

async function seeded(open: Opener) {
  const { store } = await open();
  await store.create({ sessionId: "a", owner: "alice", model: "m" });
  await store.create({ sessionId: "b", owner: "bob", model: "m" });
  await store.append("a", [turnStart("t1"), userMessage("How do I configure the zebra crossing?")]);
  await store.append("a", [delta("t1", "Paint "), delta("t1", "the stripes white."), turnEnd("t1")]);
  await store.append("b", [turnStart("t1"), userMessage("zebra facts please")]);
  await store.append("b", [
    {
      type: "user/message",
      data: { messageId: "h", source: "user", text: "", hidden: true, attachments: [], meta: {} },
    },
    {
      type: "user/message",
      data: {
        messageId: "i",
        source: "user",
        text: "zebra incognito",
        attachments: [],
        meta: { incognito: true },
      },
    },
  ]);
  return store;
}

describeContract("search", (backend) => {
  const open = storeFixture(backend);
  it("finds user message text with a snippet and the message seq", async () => {
    const store = await seeded(open);
    const hits = await store.search("zebra", 10);
    expect(hits.map((hit) => [hit.sessionId, hit.seq]).sort()).toEqual([
      ["a", 3],
      ["b", 3],
    ]);
    expect(hits.find((hit) => hit.sessionId === "a")?.snippet).toContain("**zebra**");
  });

  it("indexes a turn's joined assistant text at turn/end, at its first delta", async () => {
    const store = await seeded(open);
    expect(await store.search("stripes white", 10)).toEqual([
      { sessionId: "a", seq: 4, snippet: "Paint the **stripes** **white**." },
    ]);
  });

  it("indexes only the turn's own deltas at its end, not another turn's written after its start", async () => {
    const { store } = await open();
    await store.create({ sessionId: "c", owner: "alice", model: "m" });
    await store.append("c", [
      turnStart("t2"),
      delta("t1", "straggler"),
      delta("t2", "giraffe"),
      turnEnd("t2"),
    ]);
    expect(await store.search("giraffe", 10)).toEqual([{ sessionId: "c", seq: 4, snippet: "**giraffe**" }]);
    expect(await store.search("straggler", 10)).toEqual([]);
  });

  it("matches the last word as a prefix and ANDs words", async () => {
    const store = await seeded(open);
    expect((await store.search("configure zeb", 10)).map((hit) => hit.sessionId)).toEqual(["a"]);
    expect(await store.search("zebra absentword", 10)).toEqual([]);
    // an earlier word is not a prefix: it was typed whole
    expect(await store.search("zeb crossing", 10)).toEqual([]);
  });

  it("searches a pasted paragraph by its first 32 words", async () => {
    const store = await seeded(open);
    const words = ["how", "do", "i", "configure", "the", "zebra", "crossing"];
    const paragraph = (count: number) =>
      Array.from({ length: count }, (_, i) => words[i % words.length]).join(" ");
    expect((await store.search(`${paragraph(32)} absentword`, 10)).map((hit) => hit.sessionId)).toEqual([
      "a",
    ]);
    expect(await store.search(`${paragraph(31)} absentword`, 10)).toEqual([]);
  });

  it("finds a long token pasted whole wherever it stands in the query, and a longer word in no message matches nothing", async () => {
    const { store } = await open();
    const token = "f00d".repeat(75);
    await store.create({ sessionId: "t", owner: "alice", model: "m" });
    await store.append("t", [userMessage(`the key ${token} expired`)]);
    expect((await store.search(token, 10)).map((hit) => hit.sessionId)).toEqual(["t"]);
    expect((await store.search(`${token} expired`, 10)).map((hit) => hit.sessionId)).toEqual(["t"]);
    expect((await store.search(`key ${token}`, 10)).map((hit) => hit.sessionId)).toEqual(["t"]);
    // a word up to 100 characters long is whole, as any earlier word: not a prefix of a longer one
    expect(await store.search(`${token.slice(0, 100)} expired`, 10)).toEqual([]);
    // every word must match, however long: none is dropped from the query
    expect(await store.search(`expired ${"k".repeat(3000)}`, 10)).toEqual([]);
    expect(await store.search(`${"k".repeat(3000)} expired`, 10)).toEqual([]);
  });

  it("matches a last word shorter than three bytes as indexed whole, and a longer one as a prefix", async () => {
    const { store } = await open();
    await store.create({ sessionId: "x", owner: "alice", model: "m" });
    await store.append("x", [userMessage("xylophone music", "m1"), userMessage("the xy axis", "m2")]);
    const found = async (query: string) =>
      (await store.search(query, 10)).map((hit) => hit.snippet.replaceAll("**", "")).sort();
    expect(await found("xy")).toEqual(["the xy axis"]);
    expect(await found("x")).toEqual([]);
    expect(await found("xyl")).toEqual(["xylophone music"]);
    expect(await found("music xy")).toEqual([]);
    expect(await found("the xy")).toEqual(["the xy axis"]);
    // the last run of the last word decides: `xy.axi` ends in three
    expect(await found("xy.axi")).toEqual(["the xy axis"]);
    // counted in UTF-8 bytes of the word as indexed: two Chinese characters are 6; `éa` is `ea`, 2
    await store.append("x", [userMessage("你好世界 ready", "m3"), userMessage("éa eaux", "m4")]);
    expect(await found("你好")).toEqual(["你好世界 ready"]);
    expect(await found("éa")).toEqual(["éa eaux"]);
    expect(await found("éau")).toEqual(["éa eaux"]);
  });

  it("refuses a search whose words match more of the messages it would rank than one search ranks", async () => {
    const { store } = await open();
    await store.create({ sessionId: "many", owner: "mallory", model: "m" });
    await store.create({ sessionId: "one", owner: "eve", model: "m" });
    await store.append("one", [userMessage("a lone walrus")]);
    const batch = 500;
    for (let written = 1; written < Limits.maxSearchMatches; written += batch) {
      const count = Math.min(batch, Limits.maxSearchMatches - written);
      await store.append(
        "many",
        Array.from({ length: count }, (_, i) =>
          userMessage(`walrus number ${written + i}`, `w${written + i}`),
        ),
      );
    }
    // as many as the bound: ranked, and each principal finds its own
    expect((await store.search("walrus", 5, "eve")).map((hit) => hit.sessionId)).toEqual(["one"]);
    expect(await store.search("walrus", 5, "mallory")).toHaveLength(5);
    expect(await store.search("walrus", 5)).toHaveLength(5);
    const refused = async (owner?: string) => {
      const err = await store.search("walrus", 5, owner).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SessionmuxError);
      expect(err).toMatchObject({ code: "search_too_broad", data: { max: Limits.maxSearchMatches } });
    };
    // one more: refused before ranking to an admin, whose search would rank them all, not to a
    // principal holding no more than the bound of them
    await store.append("many", [userMessage("one walrus more", "more")]);
    await refused(undefined);
    expect(await store.search("walrus", 5, "mallory")).toHaveLength(5);
    expect((await store.search("walrus", 5, "eve")).map((hit) => hit.sessionId)).toEqual(["one"]);
    // and to mallory once she holds one past it
    await store.append("many", [userMessage("one walrus too many", "last")]);
    await refused("mallory");
    // words that narrow it are ranked again
    expect(await store.search("walrus too many", 5, "mallory")).toHaveLength(1);
  });

  it("counts a principal's search over its own sessions only: another's matches past the bound change nothing of it", async () => {
    const { store } = await open();
    await store.create({ sessionId: "many", owner: "mallory", model: "m" });
    await store.create({ sessionId: "one", owner: "eve", model: "m" });
    await store.create({ sessionId: "two", owner: "eve", model: "m" });
    await store.append("one", [userMessage("a lone walrus")]);
    const batch = 500;
    for (let written = 0; written <= Limits.maxSearchMatches; written += batch) {
      const count = Math.min(batch, Limits.maxSearchMatches + 1 - written);
      await store.append(
        "many",
        Array.from({ length: count }, (_, i) => userMessage(`walrus ${written + i}`, `w${written + i}`)),
      );
    }
    // eve's messages written before and after mallory's
    await store.append("two", [userMessage("no such animal"), userMessage("walrus again")]);
    // mallory alone holds one past the bound: eve finds her own two, ranked, and no other's
    const eves = await store.search("walrus", 5, "eve");
    expect(eves.map((hit) => [hit.sessionId, hit.seq]).sort()).toEqual([
      ["one", 2],
      ["two", 3],
    ]);
    expect(eves.find((hit) => hit.sessionId === "one")?.snippet).toBe("a lone **walrus**");
    // a principal owning nothing finds nothing, as it would without mallory's messages
    expect(await store.search("walrus", 5, "nobody")).toEqual([]);
    // mallory and an admin, whose searches would rank them all, are still refused
    for (const owner of ["mallory", undefined]) {
      const refused = await store.search("walrus", 5, owner).catch((err: unknown) => err);
      expect(refused).toMatchObject({ code: "search_too_broad", data: { max: Limits.maxSearchMatches } });
    }
    // once mallory's session is deleted, her matches count for no one
    await store.delete("many");
    expect(await store.search("walrus", 5)).toHaveLength(2);
  });

  it("ranks a principal's own hits as a search of every principal's ranks them", async () => {
    const { store } = await open();
    await store.create({ sessionId: "r", owner: "alice", model: "m" });
    await store.append("r", [
      userMessage("an otter swims past a heron", "m1"),
      userMessage("otter otter otter", "m2"),
      userMessage("one otter, one river, one bank, one long quiet afternoon", "m3"),
    ]);
    const order = async (owner?: string) => (await store.search("otter", 10, owner)).map((hit) => hit.seq);
    expect(await order("alice")).toEqual(await order());
    expect((await order("alice"))[0]).toBe(3);
    expect(await store.search("otter", 1, "alice")).toEqual([
      { sessionId: "r", seq: 3, snippet: "**otter** **otter** **otter**" },
    ]);
  });

  it("gives matches whose text passes the ranked text's budget newest first, and ranks a principal's own within it", async () => {
    const { store } = await open();
    const words = Array.from({ length: 32 }, (_, i) => `kw${i}q`);
    const query = words.join(" ");
    // mallory's messages come first, each holding every word once in 16,000 characters: together
    // past what a search of the 32 words ranks
    await store.create({ sessionId: "m", owner: "mallory", model: "m" });
    const filler = `${words.join(" ")} ${"lorem ".repeat(3000)}`.slice(0, 16_000);
    const fillers = Math.ceil(RANKED_TEXT_BUDGET / words.length / filler.length) + 1;
    for (let written = 0; written < fillers; written += 50) {
      await store.append(
        "m",
        Array.from({ length: Math.min(50, fillers - written) }, (_, i) =>
          userMessage(filler, `f${written + i}`),
        ),
      );
    }
    // then alice's: one dense with the words, ranked first, then a newer one holding each once
    await store.create({ sessionId: "a", owner: "alice", model: "m" });
    await store.append("a", [
      userMessage(`${query} ${query} ${query}`, "dense"),
      userMessage(`${query} ${"ipsum ".repeat(300)}`, "sparse"),
    ]);
    const found = async (owner?: string) =>
      (await store.search(query, 3, owner)).map((hit) => `${hit.sessionId}:${hit.seq}`);
    // alice's matches are within the budget: ranked, the dense one first
    expect(await found("alice")).toEqual(["a:2", "a:3"]);
    // an admin's search would rank every match: newest first, none ranked
    expect(await found()).toEqual(["a:3", "a:2", `m:${fillers + 1}`]);
    // and so is mallory's, her own matches past the budget
    expect(await found("mallory")).toEqual([`m:${fillers + 1}`, `m:${fillers}`, `m:${fillers - 1}`]);
    // one word of them: within the budget again, ranked
    expect((await store.search(words[0]!, 1))[0]).toMatchObject({ sessionId: "a", seq: 2 });
  });

  it("ranks a message by how often it holds the words, not by how near they stand", async () => {
    const { store } = await open();
    await store.create({ sessionId: "n", owner: "alice", model: "m" });
    const gap = "river ".repeat(40);
    await store.append("n", [
      userMessage(`heron egret ${gap}${gap}${gap}`, "near"),
      userMessage(`heron ${gap}egret ${gap}heron ${gap}egret`, "often"),
    ]);
    expect((await store.search("heron egret", 10)).map((hit) => hit.seq)).toEqual([3, 2]);
  });

  it("filters by owner", async () => {
    const store = await seeded(open);
    expect((await store.search("zebra", 10, "bob")).map((hit) => hit.sessionId)).toEqual(["b"]);
  });

  it("never fails on FTS syntax in the query", async () => {
    const store = await seeded(open);
    for (const query of [
      '"',
      'zebra"',
      "zebra OR",
      "NEAR(",
      "a AND",
      "*",
      "^zebra",
      "col:zebra",
      "(",
      ")",
      "-",
      "'",
      "zebra*",
      "\\",
      "\u0000",
      "   ",
    ]) {
      await expect(store.search(query, 10)).resolves.toBeInstanceOf(Array);
    }
    expect((await store.search('zebra"', 10)).length).toBe(2);
    expect((await store.search("(zebra)", 10)).length).toBe(2);
  });

  it("reads a quote inside a word as a break between two words of one phrase", async () => {
    const store = await seeded(open);
    const found = async (query: string) =>
      (await store.search(query, 10)).map((hit) => [hit.sessionId, hit.seq]);
    expect(await found('stripes"white')).toEqual([["a", 4]]);
    expect(await found('zebra"crossing')).toEqual([["a", 3]]);
    expect(await found('zebra"facts please')).toEqual([["b", 3]]);
    expect(await found('zebra"absentword')).toEqual([]);
  });

  it("finds the words inside file names, paths, addresses and numbers, as typed with or without their punctuation", async () => {
    const { store } = await open();
    await store.create({ sessionId: "p", owner: "alice", model: "m" });
    await store.append("p", [
      userMessage(
        "Open README.md, then /usr/lib/node_modules/app.js; mail ops@example.com about api.example.org v1.2.3 at 3.14",
      ),
    ]);
    const found = async (query: string) => (await store.search(query, 10)).map((hit) => hit.sessionId);
    for (const query of [
      "readme",
      "md",
      "README.md",
      "lib",
      "node_modules",
      "modules",
      "app.js",
      "ops",
      "example",
      "ops@example.com",
      "api.example",
      "org",
      "v1",
      "14",
      "3.14",
      "mail example.org",
    ]) {
      expect(await found(query), query).toEqual(["p"]);
    }
    // the words matched are marked where they stand, the phrase of a word as one
    const snippet = async (query: string) => (await store.search(query, 10))[0]?.snippet;
    expect(await snippet("md")).toBe("Open README.**md**, then /usr/lib/node_modules/app.js; mail ops…");
    expect(await snippet("example")).toBe("…js; mail ops@**example**.com about api.**example**.org v1.2.3…");
    expect(await snippet("3.14")).toBe("…example.com about api.example.org v1.2.3 at **3.14**");
    expect(await snippet("mail example.org")).toBe(
      "…app.js; **mail** ops@example.com about api.**example.org** v1.2…",
    );
    // the parts of a word joined by punctuation stay one phrase, in order
    for (const query of ["md.readme", "example.ops", "lib/usr", "example.net"]) {
      expect(await found(query), query).toEqual([]);
    }
  });

  it("a database from before finds the words inside the punctuated tokens it already held, in a text of any length", async () => {
    const db = await open();
    await db.store.create({ sessionId: "p", owner: "alice", model: "m" });
    await db.store.append("p", [userMessage("see README.md")]);
    await db.store.close();
    // PostgreSQL's index as it was before the migration (13) that reads punctuation as a space
    if (!db.path) {
      await tamper(
        db,
        `${UNDO_PG_LOG_KEYS} DROP INDEX search_docs_tsv;
         ALTER TABLE search_docs DROP COLUMN tsv;
         ALTER TABLE search_docs ADD COLUMN tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED;
         CREATE INDEX search_docs_tsv ON search_docs USING gin (tsv);
         DELETE FROM schema_migrations WHERE version >= ${PUNCTUATION_MIGRATION};
         INSERT INTO search_docs (session_id, seq, text) SELECT 'p', 3, string_agg(path, ' ')
           FROM (SELECT string_agg(md5(i::text), '/') AS path FROM generate_series(0, 29999) i GROUP BY i / 60) paths`,
      );
    }
    const reopened = await db.openAnother();
    expect((await reopened.search("md", 10)).map((hit) => hit.sessionId)).toEqual(["p"]);
    if (!db.path) {
      // an earlier build's index of a long text, 500 paths of 60 hashes each (under 1 MiB as one
      // word a path), holds 30,000 words now: it is found to its end
      const hash = (i: number) => createHash("md5").update(String(i)).digest("hex");
      for (const i of [0, 29_999]) {
        expect((await reopened.search(hash(i), 10)).map((hit) => [hit.sessionId, hit.seq])).toEqual([
          ["p", 3],
        ]);
      }
    }
  });

  it("ends a turn whose answer holds more distinct words than one index entry can, and finds them anywhere in it", async () => {
    const { store } = await open();
    await store.create({ sessionId: "h", owner: "alice", model: "m" });
    await store.append("h", [turnStart("t1")]);
    // 60,000 distinct words of 32 characters: about 2 MB, twice what PostgreSQL keeps in one tsvector
    const word = (i: number) => createHash("md5").update(String(i)).digest("hex");
    for (let part = 0; part < 60; part++) {
      const words = Array.from({ length: 1_000 }, (_, i) => word(part * 1_000 + i));
      await store.append("h", [delta("t1", `${words.join(" ")} needle `)]);
    }
    expect((await store.append("h", [turnEnd("t1")])).status).toBe("appended");
    // one hit for the message, wherever in it the word stands
    expect((await store.search("needle", 10)).map((hit) => [hit.sessionId, hit.seq])).toEqual([["h", 3]]);
    for (const i of [0, 30_123, 59_999]) {
      expect(await store.search(word(i), 10), String(i)).toEqual([
        { sessionId: "h", seq: 3, snippet: expect.stringContaining(`**${word(i)}**`) },
      ]);
    }
  });

  it("finds two neighbouring words of a long message together wherever they stand, across PostgreSQL's index pieces too", async () => {
    const { store } = await open();
    await store.create({ sessionId: "n", owner: "alice", model: "m" });
    // 6,000 distinct words of 32 characters and a space: about 198,000 characters, which the
    // PostgreSQL store indexes in pieces of at most 65,536 (see searchChunks)
    const word = (i: number) => createHash("md5").update(`n${i}`).digest("hex");
    const words = Array.from({ length: 6_000 }, (_, i) => word(i));
    await store.append("n", [userMessage(words.join(" "))]);
    const perPiece = Math.floor(SEARCH_CHUNK_UNITS / 33);
    for (const cut of [perPiece, 2 * perPiece - 124]) {
      for (let i = cut - 40; i < cut + 40; i++) {
        expect(
          (await store.search(`${word(i)} ${word(i + 1)}`, 10)).map((hit) => [hit.sessionId, hit.seq]),
          `words ${i} and ${i + 1}`,
        ).toEqual([["n", 2]]);
      }
    }
  });

  it("answers no hits for a query with no letter or digit in it, whatever the log holds", async () => {
    const store = await seeded(open);
    for (const query of ["", "   ", '"', "*", "- ( ) '", "\u0000"]) {
      expect(await store.search(query, 10)).toEqual([]);
      expect(await store.search(query, 10, "alice")).toEqual([]);
    }
  });

  it("keeps the answer of an incognito prompt's turn out of search too, not the answer of a hidden prompt's", async () => {
    const { store } = await open();
    await store.create({ sessionId: "q", owner: "alice", model: "m" });
    const prompt = (messageId: string, text: string, flags: { hidden?: true; incognito?: true }) => ({
      type: "user/message" as const,
      data: {
        messageId,
        source: "user" as const,
        text,
        ...(flags.hidden ? { hidden: true } : {}),
        attachments: [],
        meta: flags.incognito ? { incognito: true } : {},
      },
    });
    await store.append("q", [turnStart("t1"), prompt("m1", "plan a secret trip", { incognito: true })]);
    await store.append("q", [delta("t1", "Your walrus "), delta("t1", "itinerary"), turnEnd("t1")]);
    await store.append("q", [turnStart("t2"), prompt("m2", "", { hidden: true })]);
    await store.append("q", [delta("t2", "Your narwhal itinerary"), turnEnd("t2")]);
    await store.append("q", [turnStart("t3"), userMessage("plan a trip")]);
    await store.append("q", [delta("t3", "Your penguin itinerary"), turnEnd("t3")]);
    expect(await store.search("walrus", 10)).toEqual([]);
    expect(await store.search("secret", 10)).toEqual([]);
    expect((await store.search("narwhal", 10)).map((hit) => [hit.sessionId, hit.seq])).toEqual([["q", 9]]);
    expect((await store.search("penguin", 10)).map((hit) => [hit.sessionId, hit.seq])).toEqual([["q", 13]]);
    expect((await store.search("itinerary", 10)).map((hit) => hit.seq).sort((a, b) => a - b)).toEqual([
      9, 13,
    ]);
  });

  it("does not index hidden or incognito messages, nor keep text of deleted sessions", async () => {
    const store = await seeded(open);
    expect(await store.search("incognito", 10)).toEqual([]);
    await store.delete("a");
    expect((await store.search("zebra", 10)).map((hit) => hit.sessionId)).toEqual(["b"]);
  });
});
