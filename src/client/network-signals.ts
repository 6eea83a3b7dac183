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
