import type { TSchema } from "@sinclair/typebox";
import { describe, expect, it } from "vitest";
import { ControlItem, DownloadItem, FollowItem, Methods, validator } from "../../protocol/index.js";

/**
 * The runtime schemas `protocol/` exports for what the host sends (protocol-v1 §4 `session.page`'s
 * value, §5's items): every shape the page names passes, and what is none of them does not. The
 * samples are written by hand from the page, so a schema that drifted from it fails here.
 */

const row = {
  sessionId: "s",
  title: "t",
  createdAt: 1,
  updatedAt: 2,
  lastPromptAt: null,
  turnCount: 0,
  blank: true,
  lastState: "idle",
  live: false,
  running: false,
  seq: 1,
};
const event = { seq: 1, at: 1, type: "session/created", data: {} };
const interaction = {
  interactionId: "i",
  sessionId: "s",
  turnId: "t",
  kind: "approval",
  requestedAt: 1,
  action: "rm -rf",
};
const header = { sessionId: "s", title: "t", model: "m", createdAt: 1, epoch: "e", owner: "admin" };
const baseline = {
  kind: "baseline",
  generation: "g",
  agents: [{ sessionId: "s", state: "running" }],
  queues: [{ sessionId: "s", items: [{ itemId: "q", text: "next", queuedAt: 1 }] }],
  jobs: [{ sessionId: "s", jobs: [{ jobId: "j", label: "build", progress: 0.5, state: "running" }] }],
  interactions: [interaction],
  projections: [row],
};

interface Case {
  schema: string;
  name: string;
  value: unknown;
}

const schemas: Record<string, TSchema> = {
  "session.page": Methods["session.page"].value,
  FollowItem,
  DownloadItem,
  ControlItem,
};

const shapes: Case[] = [
  {
    schema: "session.page",
    name: "a page",
    value: { header, epoch: "e", headSeq: 1, events: [event], hasMore: false, projection: row },
  },
  { schema: "FollowItem", name: "opened", value: { kind: "opened", epoch: "e", headSeq: 0 } },
  { schema: "FollowItem", name: "reset", value: { kind: "reset", epoch: "e2" } },
  { schema: "FollowItem", name: "events", value: { kind: "events", events: [event] } },
  { schema: "FollowItem", name: "caughtUp", value: { kind: "caughtUp", seq: 1 } },
  {
    schema: "DownloadItem",
    name: "head",
    value: { kind: "head", name: "a.txt", type: "text/plain", size: 3 },
  },
  { schema: "DownloadItem", name: "bytes", value: { kind: "bytes", offset: 0, bytes: new Uint8Array(3) } },
  { schema: "ControlItem", name: "baseline", value: baseline },
  { schema: "ControlItem", name: "a baseline part", value: { ...baseline, more: true } },
  {
    schema: "ControlItem",
    name: "an agent on another host",
    value: { kind: "agent", sessionId: "s", state: "attached", hostId: "h2" },
  },
  {
    schema: "ControlItem",
    name: "agent detached",
    value: { kind: "agent", sessionId: "s", state: "detached" },
  },
  { schema: "ControlItem", name: "queue", value: { kind: "queue", sessionId: "s", items: [] } },
  { schema: "ControlItem", name: "jobs", value: { kind: "jobs", sessionId: "s", jobs: [] } },
  {
    schema: "ControlItem",
    name: "interaction.requested",
    value: { kind: "interaction.requested", interaction },
  },
  {
    schema: "ControlItem",
    name: "interaction.resolved",
    value: { kind: "interaction.resolved", interactionId: "i", resolution: { answer: "yes" } },
  },
  {
    schema: "ControlItem",
    name: "interaction.withdrawn",
    value: { kind: "interaction.withdrawn", interactionId: "i" },
  },
  {
    schema: "ControlItem",
    name: "projection",
    value: { kind: "projection", sessionId: "s", projection: row },
  },
  // §4: lastState is idle, working, input-required or how the newest turn ended
  ...["working", "input-required", "completed", "failed", "cancelled", "interrupted"].map((lastState) => ({
    schema: "ControlItem",
    name: `a projection whose lastState is ${lastState}`,
    value: { kind: "projection", sessionId: "s", projection: { ...row, lastState } },
  })),
  {
    schema: "ControlItem",
    name: "a question (§5 kind approval or question)",
    value: {
      kind: "interaction.requested",
      interaction: { ...interaction, kind: "question", question: "why?" },
    },
  },
  {
    schema: "ControlItem",
    name: "interaction.resolved with a denial",
    value: { kind: "interaction.resolved", interactionId: "i", resolution: { outcome: "deny" } },
  },
];

/** Values that are none of the shapes: each lacks what one shape needs, or names no shape. */
const nonShapes: Case[] = [
  {
    schema: "session.page",
    name: "a page without its projection",
    value: { header, epoch: "e", headSeq: 1, events: [], hasMore: false },
  },
  ...["FollowItem", "DownloadItem", "ControlItem"].map((schema) => ({
    schema,
    name: "an unknown kind",
    value: { kind: "nonsense", epoch: "e", events: [], seq: 1 },
  })),
  { schema: "FollowItem", name: "opened without headSeq", value: { kind: "opened", epoch: "e" } },
  { schema: "FollowItem", name: "caughtUp with a string seq", value: { kind: "caughtUp", seq: "1" } },
  { schema: "DownloadItem", name: "head without size", value: { kind: "head", name: "a", type: "t" } },
  { schema: "DownloadItem", name: "bytes without bytes", value: { kind: "bytes", offset: 0 } },
  { schema: "ControlItem", name: "a baseline with more: false", value: { ...baseline, more: false } },
  {
    schema: "ControlItem",
    name: "a baseline agent without its session",
    value: { ...baseline, agents: [{ state: "running" }] },
  },
  {
    schema: "ControlItem",
    name: "a baseline agent detached (only deltas say so)",
    value: { ...baseline, agents: [{ sessionId: "s", state: "detached" }] },
  },
  {
    schema: "ControlItem",
    name: "a baseline queue without its session",
    value: { ...baseline, queues: [{ items: [] }] },
  },
  {
    schema: "ControlItem",
    name: "a baseline jobs entry without its jobs",
    value: { ...baseline, jobs: [{ sessionId: "s" }] },
  },
  { schema: "ControlItem", name: "agent without a state", value: { kind: "agent", sessionId: "s" } },
  { schema: "ControlItem", name: "queue without items", value: { kind: "queue", sessionId: "s" } },
  { schema: "ControlItem", name: "jobs without jobs", value: { kind: "jobs", sessionId: "s" } },
  {
    schema: "ControlItem",
    name: "interaction.requested without it",
    value: { kind: "interaction.requested" },
  },
  {
    schema: "ControlItem",
    name: "interaction.resolved without a resolution",
    value: { kind: "interaction.resolved", interactionId: "i" },
  },
  {
    schema: "ControlItem",
    name: "interaction.withdrawn without its id",
    value: { kind: "interaction.withdrawn" },
  },
  { schema: "ControlItem", name: "projection without it", value: { kind: "projection", sessionId: "s" } },
  {
    schema: "ControlItem",
    name: "a projection whose lastState is no state",
    value: { kind: "projection", sessionId: "s", projection: { ...row, lastState: "paused" } },
  },
  {
    schema: "ControlItem",
    name: "an interaction of no kind",
    value: { kind: "interaction.requested", interaction: { ...interaction, kind: "" } },
  },
  // §5: an event's seq counts from 1, and an event carries seq, at, type and data
  {
    schema: "FollowItem",
    name: "an event with seq 0",
    value: { kind: "events", events: [{ ...event, seq: 0 }] },
  },
  ...(["seq", "at", "type"] as const).map((field) => {
    const { [field]: _left, ...rest } = event;
    return {
      schema: "FollowItem",
      name: `an event without ${field}`,
      value: { kind: "events", events: [rest] },
    };
  }),
  {
    schema: "session.page",
    name: "a page whose event has seq 0",
    value: {
      header,
      epoch: "e",
      headSeq: 1,
      events: [{ ...event, seq: 0 }],
      hasMore: false,
      projection: row,
    },
  },
];

describe("the value schemas of the method table (protocol-v1 §4, §5)", () => {
  it.each(shapes.map((c) => [c.schema, c.name, c] as const))("%s takes %s", (_schema, _name, c) => {
    const check = validator(schemas[c.schema]!);
    expect(check.check(c.value)).toBe(true);
  });

  it.each(nonShapes.map((c) => [c.schema, c.name, c] as const))("%s refuses %s", (_schema, _name, c) => {
    const check = validator(schemas[c.schema]!);
    expect(check.check(c.value)).toBe(false);
  });
});
