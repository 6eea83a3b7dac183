import { afterEach } from "vitest";
import type { MuxPeer } from "./mux-peer.js";

/**
 * A test file's host and the peers connected to it, torn down after each test: the peers
 * disconnect first, then the host is disposed. `keep` registers the test's host.
 */
export function hostTeardown<H extends { dispose(): Promise<void> }>(): {
  peers: MuxPeer[];
  keep(host: H): H;
} {
  let host: H | undefined;
  const peers: MuxPeer[] = [];
  afterEach(async () => {
    for (const peer of peers.splice(0)) await peer.disconnect();
    await host?.dispose();
    host = undefined;
  });
  return {
    peers,
    keep(started) {
      host = started;
      return started;
    },
  };
}
