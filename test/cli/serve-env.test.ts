import { Command } from "commander";
import { describe, expect, it } from "vitest";
import { registerServeCommand } from "../../src/cli/serve-command.js";

describe("sessionmux serve flags", () => {
  it("each has an environment variable named after it", () => {
    const program = new Command();
    registerServeCommand(program);
    const serve = program.commands.find((c) => c.name() === "serve");
    const flags = serve?.options ?? [];
    expect(flags.length).toBeGreaterThan(10);
    for (const flag of flags) {
      const stem = (flag.long ?? "").replace(/^--/, "").replaceAll("-", "_").toUpperCase();
      expect([flag.long, flag.envVar]).toEqual([
        flag.long,
        expect.stringMatching(new RegExp(`^SESSIONMUX_${stem}S?$`)),
      ]);
    }
  });
});
