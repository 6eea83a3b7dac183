/**
 * What the platform says about the client's network: `offline` (no network), `online` (a network
 * came back, maybe another one), `resumed` (the page became visible again; a hidden tab's timers
 * were throttled, a sleeping laptop's sockets may be dead). Each is a hint, never proof: the
 * connection answers it by probing or reconnecting now, and the host's answer decides.
 */
export type NetworkSignal = "offline" | "online" | "resumed";

/** Subscribes to network hints; returns the unsubscribe. */
export type NetworkSignals = (listener: (signal: NetworkSignal) => void) => () => void;

interface EventTargetLike {
  addEventListener(type: string, listener: () => void): void;
  removeEventListener(type: string, listener: () => void): void;
}

/**
 * The browser's hints: `online`/`offline` on `window`, `visibilitychange` to visible on
 * `document`. Undefined where there is no such window (Node), where the client gets none.
 */
export function browserNetworkSignals(scope: unknown = globalThis): NetworkSignals | undefined {
  const target = scope as Partial<EventTargetLike> & {
    document?: EventTargetLike & { visibilityState?: string };
  };
  if (typeof target.addEventListener !== "function" || typeof target.removeEventListener !== "function")
    return undefined;
  const window = target as EventTargetLike;
  // a worker has no document, and so no visibility
  const document = target.document;
  return (listener) => {
    const offline = () => listener("offline");
    const online = () => listener("online");
    const visibility = () => {
      if (document?.visibilityState === "visible") listener("resumed");
    };
    window.addEventListener("offline", offline);
    window.addEventListener("online", online);
    document?.addEventListener("visibilitychange", visibility);
    return () => {
      window.removeEventListener("offline", offline);
      window.removeEventListener("online", online);
      document?.removeEventListener("visibilitychange", visibility);
    };
  };
}

/**
 * A `resumed` hint when the client's timers were held far past their time: the machine slept or
 * the process was stopped, and its sockets' paths may have died meanwhile (nothing else tells a
 * Node process). A tick every `tickMs` that comes more than `jumpMs` late is such a gap. The timer
 * is unreferenced, so it never keeps a process alive.
 */
export function clockJumpSignals(options: { tickMs?: number; jumpMs?: number } = {}): NetworkSignals {
  const tickMs = options.tickMs ?? 2_000;
  const jumpMs = options.jumpMs ?? 10_000;
  return (listener) => {
    let last = Date.now();
    const timer = setInterval(() => {
      const now = Date.now();
      const late = now - last - tickMs;
      last = now;
      if (late > jumpMs) listener("resumed");
    }, tickMs);
    (timer as { unref?: () => void }).unref?.();
    return () => clearInterval(timer);
  };
}
