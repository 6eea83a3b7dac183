import { afterEach, describe, expect, test, vi } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { type CallMeter, meteredCalls } from "../../src/embed/metered-calls.js";
import type { HostApi } from "../../src/host/host-api.js";
import type { Principal } from "../../src/host/principal.js";

const alice: Principal = { name: "alice", admin: false };

/** A host whose state is private, as the real one's is: a method called with another `this` throws. */
class FakeHost {
  readonly hostId = "host-1";
  #calls: string[] = [];
  #failWith: unknown = null;
  #takesMs = 0;

  script(failWith: unknown, takesMs: number): void {
    this.#failWith = failWith;
    this.#takesMs = takesMs;
  }

  seen(): string[] {
    return this.#calls;
  }

  async call(principal: Principal, method: string, params: unknown): Promise<unknown> {
    return this.#answer(`call ${principal.name} ${method} ${JSON.stringify(params)}`);
  }

  async openAttachment(principal: Principal, method: string, params: unknown): Promise<unknown> {
    return this.#answer(`open ${principal.name} ${method} ${JSON.stringify(params)}`);
  }

  async authorizeRead(principal: Principal, sessionId: string): Promise<void> {
    this.#calls.push(`authorize ${principal.name} ${sessionId}`);
  }

  async #answer(what: string): Promise<unknown> {
    this.#calls.push(what);
    vi.advanceTimersByTime(this.#takesMs);
    if (this.#failWith !== null) throw this.#failWith;
    return { answered: what };
  }
}

function setup() {
  vi.useFakeTimers({ toFake: ["performance"] });
  const fake = new FakeHost();
  const observed: [{ method: string; outcome: string }, number][] = [];
  const meter: CallMeter = { observe: (labels, seconds) => void observed.push([labels, seconds]) };
  return { fake, observed, host: meteredCalls(fake as unknown as HostApi, meter) };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("meteredCalls", () => {
  test("a call passes through and is timed under its method, outcome ok, from its start to its answer", async () => {
    const { fake, observed, host } = setup();
    fake.script(null, 250);
    const params = { sessionId: "s1" };
    await expect(host.call(alice, "session.page", params as never)).resolves.toEqual({
      answered: 'call alice session.page {"sessionId":"s1"}',
    });
    expect(observed).toEqual([[{ method: "session.page", outcome: "ok" }, 0.25]]);
  });

  test("a call that fails is timed with the error's code and still rejects with that error", async () => {
    const { fake, observed, host } = setup();
    const refused = new SessionmuxError("session_not_found", "no such session");
    fake.script(refused, 1500);
    await expect(host.call(alice, "session.page", { sessionId: "s9" } as never)).rejects.toBe(refused);
    const crashed = new Error("disk on fire");
    fake.script(crashed, 0);
    await expect(host.call(alice, "session.list", {} as never)).rejects.toBe(crashed);
    expect(observed).toEqual([
      [{ method: "session.page", outcome: "session_not_found" }, 1.5],
      [{ method: "session.list", outcome: "internal_error" }, 0],
    ]);
  });

  test("opening an attachment body is timed under the method that opened it", async () => {
    const { fake, observed, host } = setup();
    fake.script(null, 40);
    const params = { sessionId: "s1", attachmentId: "a1" };
    await expect(host.openAttachment(alice, "session.download", params)).resolves.toEqual({
      answered: 'open alice session.download {"sessionId":"s1","attachmentId":"a1"}',
    });
    fake.script(new SessionmuxError("attachment_not_found", "gone"), 10);
    await expect(host.openAttachment(alice, "session.attachment", params)).rejects.toMatchObject({
      code: "attachment_not_found",
    });
    expect(observed).toEqual([
      [{ method: "session.download", outcome: "ok" }, 0.04],
      [{ method: "session.attachment", outcome: "attachment_not_found" }, 0.01],
    ]);
  });

  test("every other member passes through untimed: values as they are, methods bound to the host", async () => {
    const { fake, observed, host } = setup();
    expect(host.hostId).toBe("host-1");
    const { authorizeRead } = host;
    await authorizeRead(alice, "s1");
    await host.authorizeRead(alice, "s2");
    expect(fake.seen()).toEqual(["authorize alice s1", "authorize alice s2"]);
    expect(observed).toEqual([]);
  });
});
