import { expect, it } from "vitest";
import { readWholeLog } from "../../support/whole-log.js";
import { turnEnd, turnStart, userMessage } from "../open-store.js";
import { describeContract, storeFixture } from "./backends.js";

/**
 * A turn ends once, whoever writes its end and however often: the rule is the store's, decided
 * in the append's transaction, so a writer that lost the first end's answer and writes it again,
 * or one whose end races another's, leaves one `turn/end` in the log.
 */
describeContract("a turn's end", (backend) => {
  const open = storeFixture(backend);

  it("written again, or for a turn the log never opened, is left out of the append; the rest of it is written", async () => {
    const { store } = await open();
    await store.create({ sessionId: "s", owner: "o", model: "m" });
    await store.append("s", [turnStart("t1"), userMessage("hi")]);
    const first = await store.append("s", [turnEnd("t1")]);
    expect(first.status === "appended" && first.events.map((e) => e.type)).toEqual(["turn/end"]);

    const again = await store.append("s", [turnEnd("t1", "interrupted")]);
    expect(again).toMatchObject({ status: "appended", events: [] });
    const stray = await store.append("s", [turnEnd("never-opened"), userMessage("after")]);
    expect(stray.status === "appended" && stray.events.map((e) => e.type)).toEqual(["user/message"]);
    // each of two stray ends is left out, and what stands between and after them is kept, in order
    const strays = await store.append("s", [
      turnEnd("gone-1"),
      userMessage("between", "m-between"),
      turnEnd("gone-2"),
      userMessage("last", "m-last"),
    ]);
    expect(
      strays.status === "appended" &&
        strays.events.map((e) => (e.type === "user/message" ? e.data.text : e.type)),
    ).toEqual(["between", "last"]);
    // a turn opened and ended in one append ends there; a second end in the same append does not
    const whole = await store.append("s", [turnStart("t2"), turnEnd("t2", "failed"), turnEnd("t2")]);
    expect(whole.status === "appended" && whole.events.map((e) => e.type)).toEqual([
      "turn/start",
      "turn/end",
    ]);

    const read = await readWholeLog(store, "s");
    if (read.status !== "ok") throw new Error(read.status);
    const ends = read.events.flatMap((e) =>
      e.type === "turn/end" ? [`${e.data.turnId} ${e.data.state}`] : [],
    );
    expect(ends).toEqual(["t1 completed", "t2 failed"]);
    expect(read.events.map((e) => e.seq)).toEqual(read.events.map((_, i) => i + 1));
    expect(await store.projection("s")).toMatchObject({ lastState: "failed", turnCount: 2 });
  });
});
