import { firstValueFrom } from "rxjs";
import { filter } from "rxjs/operators";
import { describe, expect, it } from "vitest";
import { DemoAgent } from "../../src/agents/demo-agent.js";
import { createNodeClient } from "../../src/client/node.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { mountedApp } from "./app-fixture.js";

const cleanups = cleanupsAfterEach();

/** The live-state series of `/metrics`, as an operator's scrape reads them. */
async function liveSeries(authority: string): Promise<string[]> {
  const res = await fetch(`http://${authority}/chat/metrics`, {
    headers: { authorization: "Bearer user:root" },
  });
  return (await res.text())
    .split("\n")
    .filter((line) => /^sessionmux_(queued_prompts|pending_interactions|running_jobs)/.test(line));
}

const series = (queued: number, approvals: number, questions: number, jobs: number) => [
  `sessionmux_queued_prompts ${queued}`,
  `sessionmux_pending_interactions{kind="approval"} ${approvals}`,
  `sessionmux_pending_interactions{kind="question"} ${questions}`,
  `sessionmux_running_jobs ${jobs}`,
];

describe("a host's /metrics counts the live state at each scrape", () => {
  it("queued prompts, approvals and questions waiting, running jobs; and each count falls as they settle", async () => {
    const { authority } = await mountedApp(cleanups, { agent: new DemoAgent() });
    const client = createNodeClient({ url: `ws://${authority}/chat/api/remote.mux`, token: "user:alice" });
    cleanups.push(() => client.close());
    expect(await liveSeries(authority)).toEqual(series(0, 0, 0, 0));
    const session = async () => (await client.create({})).header.sessionId;
    const [approving, asking, working] = [await session(), await session(), await session()];
    await client.prompt({ sessionId: approving, text: "/approve deploy" });
    await client.prompt({ sessionId: asking, text: "/ask favourite colour?" });
    await client.prompt({ sessionId: working, text: "/job 8" });
    // behind the parked approval, two prompts wait
    expect((await client.prompt({ sessionId: approving, text: "then this" })).queued).toBe(true);
    expect((await client.prompt({ sessionId: approving, text: "and this" })).queued).toBe(true);
    await expect.poll(() => liveSeries(authority), { timeout: 10_000 }).toEqual(series(2, 1, 1, 1));
    const mirror = await firstValueFrom(
      client.control().pipe(filter((m) => !m.stale && Object.keys(m.interactions).length === 2)),
    );
    const interactionOf = (sessionId: string) =>
      Object.values(mirror.interactions).find((i) => i.sessionId === sessionId)!.interactionId;
    await client.call("session.respond", {
      interactionId: interactionOf(asking),
      response: { answer: "blue" },
    });
    await expect.poll(() => liveSeries(authority), { timeout: 10_000 }).toEqual(series(2, 1, 0, 1));
    // the approval answered, its turn ends and the two queued prompts run one after the other
    await client.call("session.respond", {
      interactionId: interactionOf(approving),
      response: { outcome: "approve" },
    });
    await expect
      .poll(async () => (await liveSeries(authority)).slice(0, 3), { timeout: 20_000 })
      .toEqual(series(0, 0, 0, 0).slice(0, 3));
    // the job ends by itself
    await expect.poll(() => liveSeries(authority), { timeout: 30_000 }).toEqual(series(0, 0, 0, 0));
  });
});
