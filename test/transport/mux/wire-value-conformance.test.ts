import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CallMethod, Methods, type StreamMethod, validator } from "../../../protocol/index.js";
import { startTestHost, type TestHost } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { until } from "../../support/until.js";
import { connect } from "./mux-fixture.js";

/**
 * What a real host sends fits the value schemas `protocol/` exports for it (§4 results, §5 items):
 * a client or a script in another language may check the host's answers with them, so a schema
 * that refused a real answer, or a host that sent a shape the schema does not know, fails here.
 * Every call result and every item of a stream this session sees is checked against its method's.
 */

let host: TestHost;
let peer: MuxPeer;
const streams: { id: number; method: StreamMethod }[] = [];

beforeAll(async () => {
  host = await startTestHost();
  peer = await connect(host);
});
afterAll(async () => {
  await peer?.disconnect();
  await host?.dispose();
});

/** A call whose result is checked against its method's value schema; `parse` names the field. */
async function call<M extends CallMethod>(method: M, params: Record<string, unknown>): Promise<unknown> {
  const value = await peer.call(method, params);
  validator(Methods[method].value).parse(value, `${method} result`);
  return value;
}

function open(method: StreamMethod, params: Record<string, unknown>): number {
  const id = peer.open(method, params);
  streams.push({ id, method });
  return id;
}

function kinds(id: number): string[] {
  return peer.items<{ kind: string }>(id).map((item) => item.kind);
}

describe("the host's answers fit the method table's value schemas", () => {
  it("every result and every item of a session's life: prompts, a queue, a job, interactions, a clear, a download", async () => {
    const control = open("session.control", {});
    const parts = open("session.control", { baselineParts: true });
    await until(
      () => kinds(control).includes("baseline") && kinds(parts).includes("baseline"),
      10_000,
      "baselines",
    );

    const { header } = (await call("session.create", { title: "conformance" })) as {
      header: { sessionId: string };
    };
    const sessionId = header.sessionId;
    const follow = open("session.follow", { sessionId });

    // a turn waiting on an approval, a prompt queued behind it, then the answer
    await call("session.prompt", { sessionId, text: "/approve go", clientMessageId: "m1" });
    await until(() => kinds(control).includes("interaction.requested"), 10_000, "an interaction");
    const queued = (await call("session.prompt", { sessionId, text: "/job 0", clientMessageId: "m2" })) as {
      queued: boolean;
    };
    expect(queued.queued).toBe(true);
    await call("session.updateQueue", { sessionId, op: { clear: true } });
    await call("session.prompt", { sessionId, text: "/job 0", clientMessageId: "m3" });
    const interactionId = host.host.live.interactions()[0]!.interactionId;
    await call("session.respond", { interactionId, response: { outcome: "approve" } });
    await until(() => kinds(control).includes("jobs"), 10_000, "a job");

    // a question withdrawn by a cancel
    const idle = () => !host.host.live.isRunning(sessionId) && host.host.live.queue(sessionId).length === 0;
    await until(idle, 10_000, "both turns ended");
    await call("session.prompt", { sessionId, text: "/ask really?", clientMessageId: "m4" });
    await until(() => host.host.live.interactions().length === 1, 10_000, "a question");
    await call("session.cancel", { sessionId });
    await until(() => kinds(control).includes("interaction.withdrawn"), 10_000, "withdrawn");

    // the reads, the cold writes, a clear seen by the follower as a reset
    await call("session.list", {});
    await call("session.page", { sessionId });
    await call("session.search", { query: "approve" });
    await call("session.models", {});
    await call("session.rename", { sessionId, title: "renamed" });
    await call("session.selectModel", { sessionId, model: "demo-careful" });
    await call("session.ack", { sessionId, completionSettledAt: 0 });
    await call("session.fork", { sourceId: sessionId });
    await until(() => kinds(follow).includes("caughtUp"), 10_000, "caught up");
    await call("session.clear", { sessionId });
    await until(() => kinds(follow).includes("reset"), 10_000, "a reset");
    await call("session.dismiss", { sessionId });
    await call("session.restore", { sessionId });

    // an attachment, read whole and as a stream
    const attachmentId = await host.store.putAttachment({
      owner: "admin",
      name: "a.bin",
      type: "x/y",
      bytes: new Uint8Array(70_000).fill(7),
    });
    await call("session.attachment", { sessionId, attachmentId });
    const download = open("session.download", { sessionId, attachmentId });
    expect((await peer.waitTerminal(download)).type).toBe("end");
    await call("session.delete", { sessionId });

    for (const { id, method } of streams) {
      const check = validator(Methods[method].value);
      for (const item of peer.items(id)) check.parse(item, `${method} item`);
    }
    const seen = new Set(streams.flatMap(({ id }) => kinds(id)));
    expect([...seen].sort()).toEqual(
      [
        "opened",
        "events",
        "caughtUp",
        "reset",
        "baseline",
        "agent",
        "queue",
        "jobs",
        "interaction.requested",
        "interaction.resolved",
        "interaction.withdrawn",
        "projection",
        "head",
        "bytes",
      ].sort(),
    );
  });
});
