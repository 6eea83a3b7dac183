import { describe, expect, it } from "vitest";
import { BaselineAssembly } from "../../src/client/baseline-assembly.js";

const part = (ids: number[], more: boolean, generation = "g1") => ({
  kind: "baseline" as const,
  generation,
  agents: ids.map((i) => ({ sessionId: `s${i}`, state: "idle" as const })),
  queues: [],
  jobs: [],
  interactions: [],
  projections: [],
  ...(more ? { more: true as const } : {}),
});

describe("BaselineAssembly (protocol-v1 §5, baselineParts)", () => {
  it("a baseline in one item passes as it is", () => {
    const assembly = new BaselineAssembly();
    const whole = part([1], false);
    expect(assembly.add(whole)).toBe(whole);
  });

  it("joins parts at the last one, and starts afresh for the next baseline", () => {
    const assembly = new BaselineAssembly();
    expect(assembly.add(part([1, 2], true))).toBeUndefined();
    expect(assembly.add(part([3], false))).toEqual(part([1, 2, 3], false));
    expect(assembly.add(part([4], true))).toBeUndefined();
    expect(assembly.add(part([5], false, "g2"))).toEqual(part([4, 5], false, "g2"));
    const alone = part([6], false);
    expect(assembly.add(alone)).toBe(alone);
  });

  it("a baseline that never ends is refused invalid_host_frame past 4,096 parts, the parts dropped", () => {
    const assembly = new BaselineAssembly();
    for (let i = 0; i < 4096; i++) expect(assembly.add(part([], true))).toBeUndefined();
    expect(assembly.add(part([], true))).toMatchObject({
      code: "invalid_host_frame",
      data: { method: "session.control" },
    });
    // nothing kept of it: the next baseline stands alone
    expect(assembly.add(part([1], true))).toBeUndefined();
    expect(assembly.add(part([2], false))).toEqual(part([1, 2], false));
  });

  it("a baseline that never ends is refused invalid_host_frame past 64 Mi characters of parts", () => {
    const assembly = new BaselineAssembly();
    // each part a little over 1 Mi characters: the 64th passes the bound
    const big = { ...part([], true), projections: [{ title: "x".repeat(1024 * 1024) }] } as ReturnType<
      typeof part
    >;
    for (let i = 0; i < 63; i++) expect(assembly.add(big)).toBeUndefined();
    expect(assembly.add(big)).toMatchObject({ code: "invalid_host_frame" });
    // the parts dropped: a baseline in one item passes as it is
    const alone = part([2], false);
    expect(assembly.add(alone)).toBe(alone);
  });

  it("reset drops the parts kept", () => {
    const assembly = new BaselineAssembly();
    assembly.add(part([1], true));
    assembly.reset();
    const whole = part([2], false);
    expect(assembly.add(whole)).toBe(whole);
  });
});
