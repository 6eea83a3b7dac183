import { CommanderError } from "commander";
import { expect } from "vitest";

/** The refusal commander makes of a bad value when `parse` runs, with the option's own message. */
export function commanderRefusal(parse: () => unknown, input: unknown): CommanderError {
  try {
    parse();
  } catch (err) {
    expect(err).toBeInstanceOf(CommanderError);
    return err as CommanderError;
  }
  throw new Error(`accepted ${JSON.stringify(input)}`);
}
