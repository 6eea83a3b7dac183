import { toSessionmuxError } from "../../protocol/index.js";
import type { HostApi } from "../host/host-api.js";

/** Where call latencies go; `outcome` is `ok` or the error code. */
export interface CallMeter {
  observe(labels: { method: string; outcome: string }, seconds: number): void;
}

/**
 * The host as the mux sees it, with every call timed. A proxy, so members added to `HostApi`
 * later pass through untouched; methods are bound to the host, whose state is private.
 */
export function meteredCalls(host: HostApi, meter: CallMeter): HostApi {
  const call: HostApi["call"] = async (principal, method, params) => {
    const started = performance.now();
    let outcome = "ok";
    try {
      return await host.call(principal, method, params);
    } catch (err) {
      outcome = toSessionmuxError(err).code;
      throw err;
    } finally {
      meter.observe({ method, outcome }, (performance.now() - started) / 1000);
    }
  };
  return new Proxy(host, {
    get(target, property) {
      if (property === "call") return call;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
