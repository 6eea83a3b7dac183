import { describe, expect, it } from "vitest";
import type { ForwardedCall } from "../../src/store/call-inbox.js";
import { LocalCallInbox } from "../../src/store/local-call-inbox.js";

const call: ForwardedCall = {
  callId: "c1",
  fromHost: "h1",
  sessionId: "s1",
  principal: { name: "alice", admin: false },
  method: "session.prompt",
  params: { text: "hi" },
};

describe("the call inbox of a store one host uses", () => {
  it("answers a call sent to another host not_owner, so the sender resolves the owner again", async () => {
    const inbox = new LocalCallInbox();
    await expect(inbox.send("h2", call, 1_000)).resolves.toEqual({ status: "not_owner" });
  });

  it("never hands a served host a call, and stops serving without error", async () => {
    const inbox = new LocalCallInbox();
    const handled: ForwardedCall[] = [];
    const stop = inbox.serve("h1", async (forwarded) => {
      handled.push(forwarded);
      return { status: "ok", result: null };
    });
    // a call sent meanwhile, even addressed to the serving host, is not delivered
    await expect(inbox.send("h1", call, 1_000)).resolves.toEqual({ status: "not_owner" });
    expect(stop()).toBeUndefined();
    expect(handled).toEqual([]);
  });
});
