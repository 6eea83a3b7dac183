import { expect } from "vitest";
import { StartupError } from "../../src/operations/startup-error.js";

/** The `StartupError` an operation must reject with (a resolve fails the test). */
export async function refusal(run: Promise<unknown>): Promise<StartupError> {
  const outcome = await run.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(outcome).toBeInstanceOf(StartupError);
  return outcome as StartupError;
}

/** The `StartupError` a synchronous operation must throw (returning fails the test). */
export function thrownRefusal(run: () => unknown): StartupError {
  let thrown: unknown;
  try {
    run();
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(StartupError);
  return thrown as StartupError;
}
