import { afterEach } from "vitest";
import { LISTENER_WARNING_CODE } from "../../src/store/commit-listeners.js";

/**
 * Every store a test opens without a logger of its own reports a throwing commit listener
 * as a process warning. The guard keeps production up; in a test it would hide a failed `expect`
 * inside a listener, so any such warning fails the test that raised it.
 */
const KEY = Symbol.for("sessionmux.test.listenerWarnings");
const state = globalThis as { [KEY]?: string[] };
const firstLoad = state[KEY] === undefined;
state[KEY] ??= [];
const thrown = state[KEY];

/** For the test of the warning itself: takes the warnings raised so far, so they fail nothing. */
export async function takeListenerWarnings(): Promise<string[]> {
  await new Promise((resolve) => setImmediate(resolve));
  return thrown.splice(0);
}

if (firstLoad) {
  process.on("warning", (warning) => {
    if ((warning as Error & { code?: string }).code === LISTENER_WARNING_CODE) thrown.push(warning.message);
  });
  afterEach(async () => {
    // warnings are emitted on the next tick
    await new Promise((resolve) => setImmediate(resolve));
    if (thrown.length === 0) return;
    const messages = thrown.splice(0);
    throw new Error(`commit listener(s) threw during the test:\n${messages.join("\n")}`);
  });
}
