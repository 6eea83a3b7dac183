import { afterAll, beforeAll, beforeEach, expect } from "vitest";
import { DurableContent, type DurableSnapshot } from "../../support/durable-snapshot.js";
import { startTestHost, type TestHost } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { connect } from "./mux-fixture.js";

/** A file's host and peer for tests of input that must be refused and change nothing durable. */
export interface RefusalHost {
  readonly host: TestHost;
  readonly peer: MuxPeer;
  /** Fails unless every table of the host's database holds what it held at the baseline. */
  expectUnchanged(): void;
  /** Moves the baseline (taken before each test) to now, once what clears and deletes left is purged. */
  takeBaseline(): Promise<void>;
}

/**
 * Starts one host and one admin peer for the file (`setUp` then prepares what its tests need) and
 * takes the database's whole content before each test, for `expectUnchanged`.
 */
export function refusalHost(setUp?: (host: TestHost, peer: MuxPeer) => Promise<void>): RefusalHost {
  let host: TestHost | undefined;
  let peer: MuxPeer | undefined;
  let durable: DurableContent | undefined;
  let before: DurableSnapshot | undefined;
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error("the refusal host is not started yet");
    return value;
  };
  beforeAll(async () => {
    host = await startTestHost();
    peer = await connect(host);
    await setUp?.(host, peer);
    durable = new DurableContent(host.dbPath);
  });
  afterAll(async () => {
    durable?.close();
    await peer?.disconnect();
    await host?.dispose();
  });
  // a clear or a delete leaves its rows to the store's purger, which deletes them afterwards
  const settled = () => (started(host).store as { purgesSettled?: () => Promise<void> }).purgesSettled?.();
  beforeEach(async () => {
    await settled();
    before = started(durable).snapshot();
  });
  return {
    get host() {
      return started(host);
    },
    get peer() {
      return started(peer);
    },
    expectUnchanged() {
      expect(started(durable).snapshot()).toEqual(before);
    },
    async takeBaseline() {
      await settled();
      before = started(durable).snapshot();
    },
  };
}
