import type { Cleanup } from "./cleanups.js";
import { MuxPeer } from "./mux-peer.js";

/**
 * Opens raw mux peers on hosts, each on a socket of its own with `token`, disconnected by
 * `cleanups` after the test: for tests that hold several sockets on several hosts.
 */
export function peersCleanedBy(
  cleanups: Cleanup[],
): (host: { readonly wsUrl: string }, token: string) => Promise<MuxPeer> {
  return async (host, token) => {
    const peer = await MuxPeer.connect(host.wsUrl, { token });
    cleanups.push(() => peer.disconnect());
    return peer;
  };
}
