import { toSessionmuxError } from "../../protocol/index.js";
import type { HostApi } from "../host/host-api.js";

/** Where call latencies go; `outcome` is `ok` or the error code. */
export interface CallMeter {
  observe(labels: { method: string; outcome: string }, seconds: number): void;
}

/**
 * The host as the mux sees it, with every call timed; a body opened with `openAttachment` (a
 * `session.attachment` call or a `session.download` stream) is timed under the method that opened
 * it, until its body starts. A proxy, so members added to `HostApi` later
 * pass through untouched; methods are bound to the host, whose state is private.
 */
export function meteredCalls(host: HostApi, meter: CallMeter): HostApi {
  async function timed<T>(method: string, run: () => Promise<T>): Promise<T> {
    const started = performance.now();
    let outcome = "ok";
    try {
      return await run();
    } catch (err) {
      outcome = toSessionmuxError(err).code;
      throw err;
    } finally {
      meter.observe({ method, outcome }, (performance.now() - started) / 1000);
    }
  }
  const call: HostApi["call"] = (principal, method, params, signal) =>
    timed(method, () => host.call(principal, method, params, signal));
  const openAttachment: HostApi["openAttachment"] = (principal, method, params) =>
    timed(method, () => host.openAttachment(principal, method, params));
  return new Proxy(host, {
    get(target, property) {
      if (property === "call") return call;
      if (property === "openAttachment") return openAttachment;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
