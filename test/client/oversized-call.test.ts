import { describe, expect, it } from "vitest";
import { SessionmuxError } from "../../protocol/errors.js";
import { hostPerTest } from "../support/use-test-host.js";

const MAX = 32 * 1024;

const startHost = hostPerTest();

describe("a call whose frame is over the host's limit (protocol-v1 §3 hello.maxPayloadBytes)", () => {
  it("is refused by the client with payload_too_large, the socket and its follow untouched, and is never resent", async () => {
    const { client } = await startHost({ mux: { maxPayloadBytes: MAX } });
    const { header } = await client.call("session.create", {});
    const states: string[] = [];
    const watching = client.state$.subscribe((state) => states.push(state.name));
    const opened = client.state;
    const items: unknown[] = [];
    let followError: unknown;
    const follow = client.open("session.follow", { sessionId: header.sessionId }).subscribe({
      next: (item) => items.push(item),
      error: (error) => {
        followError = error;
      },
    });
    // a prompt that the host's string limit (64 KiB) would take, but not its frame limit
    const text = "x".repeat(40_000);
    const refused = await client
      .call(
        "session.prompt",
        { sessionId: header.sessionId, text, clientMessageId: "big" },
        { timeoutMs: 5_000 },
      )
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(SessionmuxError);
    expect(refused).toMatchObject({
      code: "payload_too_large",
      retryable: false,
      data: { max: MAX },
    });
    const { bytes } = (refused as SessionmuxError).data as { bytes: number };
    expect(bytes).toBeGreaterThan(40_000);
    expect((refused as Error).message).toBe(
      `the session.prompt call is ${bytes} bytes encoded; the host reads frames of at most ${MAX} bytes`,
    );
    // the same socket still carries calls, and the session holds no prompt
    const page = await client.call("session.page", { sessionId: header.sessionId });
    expect(page.events.map((event) => event.type)).toEqual(["session/created"]);
    expect(client.state).toBe(opened);
    expect(states.filter((name) => name !== "open")).toEqual([]);
    expect(followError).toBeUndefined();
    // a prompt within the limit goes through on it
    await client.call("session.prompt", {
      sessionId: header.sessionId,
      text: "x".repeat(1_000),
      clientMessageId: "small",
    });
    expect(client.state).toBe(opened);
    follow.unsubscribe();
    watching.unsubscribe();
  });
});
