import { describe, expect, it } from "vitest";
import { outcomeUnknown, UnconfirmedPrompts } from "../../web/src/unconfirmed-prompts.js";

describe("console prompts whose answer never came", () => {
  it("sends the same text again with the unconfirmed id, once, and a fresh id for anything else", () => {
    const prompts = new UnconfirmedPrompts();
    const first = prompts.idFor("s1", "deploy it");
    prompts.keep("s1", "deploy it", first);
    // another session, or other text, is a prompt of its own
    expect(prompts.idFor("s2", "deploy it")).not.toBe(first);
    expect(prompts.idFor("s1", "deploy it")).toBe(first);
    // used up by that send: the same words typed later are a new prompt
    expect(prompts.idFor("s1", "deploy it")).not.toBe(first);
  });

  it("forgets the unconfirmed id once another prompt of the session went", () => {
    const prompts = new UnconfirmedPrompts();
    const first = prompts.idFor("s1", "yes");
    prompts.keep("s1", "yes", first);
    expect(prompts.idFor("s1", "something else")).not.toBe(first);
    expect(prompts.idFor("s1", "yes")).not.toBe(first);
  });

  it("takes a call that went out and got no answer, or an outcome the host cannot tell, as unknown; a refusal as known", () => {
    expect(outcomeUnknown({ code: "timeout", data: { sent: true } })).toBe(true);
    expect(outcomeUnknown({ code: "aborted", data: { sent: true } })).toBe(true);
    expect(outcomeUnknown({ code: "outcome_unknown", data: { method: "session.prompt" } })).toBe(true);
    expect(outcomeUnknown({ code: "timeout", data: { sent: false } })).toBe(false);
    expect(outcomeUnknown({ code: "queue_full", data: { max: 10 } })).toBe(false);
    expect(outcomeUnknown(new Error("boom"))).toBe(false);
    expect(outcomeUnknown(undefined)).toBe(false);
  });
});
