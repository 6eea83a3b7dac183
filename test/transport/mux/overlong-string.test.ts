import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createNodeClient, type SessionmuxClient } from "../../../src/client/node.js";
import { RemoteError } from "../../../src/client/remote-errors.js";
import { DurableContent, type DurableSnapshot } from "../../support/durable-snapshot.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { connect, createSession, openCanary } from "./mux-fixture.js";

/**
 * A string over the decoder's limit (64 KiB of UTF-8 by default, protocol-v1 §7) in a frame that
 * is otherwise well-formed, such as a prompt whose text is a long paste: `bad_frame`, answered
 * with the frame's id so the call ends at once instead of waiting for its timeout, unless that id
 * is in flight. Nothing durable changes and the socket's other streams go on.
 */

const LIMIT = 64 * 1024;

let host: TestHost;
let peer: MuxPeer;
let canary: Awaited<ReturnType<typeof openCanary>>;
let durable: DurableContent;
let before: DurableSnapshot;
let sessionId: string;

beforeAll(async () => {
  host = await startTestHost();
  peer = await connect(host);
  canary = await openCanary(host, peer);
  durable = new DurableContent(host.dbPath);
  sessionId = await createSession(peer);
});
afterAll(async () => {
  durable?.close();
  await peer?.disconnect();
  await host?.dispose();
});
beforeEach(() => {
  before = durable.snapshot();
});

function prompt(id: number, text: string, clientMessageId = `m${id}`) {
  return { type: "call", id, method: "session.prompt", params: { sessionId, text, clientMessageId } };
}

describe("a string over the decoder's limit in a well-formed frame", () => {
  it("is bad_frame answered with the call's id; nothing is written and the socket goes on", async () => {
    const id = peer.nextId();
    peer.send(prompt(id, "x".repeat(LIMIT + 1)));
    const answer = await peer.waitTerminal(id);
    expect(answer.error).toMatchObject({
      code: "bad_frame",
      category: "protocol",
      message: expect.stringContaining(`string of ${LIMIT + 1} bytes over the limit`),
    });
    expect(durable.snapshot()).toEqual(before);
    await canary.check();
  });

  it("at the limit is a prompt like any other", async () => {
    const answer = await peer.call<{ seq?: number }>("session.prompt", {
      sessionId,
      text: "x".repeat(LIMIT),
      clientMessageId: "at-the-limit",
    });
    expect(answer.seq).toBeGreaterThan(0);
  });

  it("counts bytes, not characters: 21,846 three-byte characters are over", async () => {
    const id = peer.nextId();
    peer.send(prompt(id, "€".repeat(Math.floor(LIMIT / 3) + 1)));
    expect((await peer.waitTerminal(id)).error?.code).toBe("bad_frame");
  });

  it("with the id of a running stream, or a close of it, goes untied and leaves the stream alone", async () => {
    const seen = peer.unidentifiedErrors().length;
    peer.send(prompt(canary.id, "x".repeat(LIMIT + 1)));
    expect((await peer.waitUnidentifiedError(seen + 1)).code).toBe("bad_frame");
    peer.send({ type: "close", id: canary.id, reason: "x".repeat(LIMIT + 1) });
    expect((await peer.waitUnidentifiedError(seen + 2)).code).toBe("bad_frame");
    expect(peer.terminal(canary.id)).toBeUndefined();
    await canary.check();
  });

  it("in a frame without a usable id goes untied", async () => {
    const seen = peer.unidentifiedErrors().length;
    for (const id of [undefined, 0, "7"]) {
      peer.send({ type: "call", id, method: "session.models", params: { x: "x".repeat(LIMIT + 1) } });
    }
    // another fault beside the long string: the frame stays unreadable
    peer.send({
      type: "call",
      id: peer.nextId(),
      method: "session.models",
      ["__proto__"]: "x".repeat(LIMIT + 1),
    });
    await peer.waitUnidentifiedError(seen + 4);
    expect(
      peer
        .unidentifiedErrors()
        .slice(seen)
        .map((e) => e.code),
    ).toEqual(["bad_frame", "bad_frame", "bad_frame", "bad_frame"]);
    expect(durable.snapshot()).toEqual(before);
  });
});

describe("the SDK's call of such a frame", () => {
  let client: SessionmuxClient;
  beforeAll(() => {
    client = createNodeClient({ url: host.wsUrl, token: ADMIN_TOKEN });
  });
  afterAll(async () => client?.close());

  it("fails with bad_frame at once, not after its timeout", async () => {
    const error = await client
      .prompt({ sessionId, text: "x".repeat(LIMIT + 1) }, { timeoutMs: 60_000 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RemoteError);
    expect(error).toMatchObject({ code: "bad_frame" });
  });
});
