import type { Subscription } from "rxjs";
import { createNodeClient, followSession, type SessionmuxClient } from "../../src/client/node.js";

/**
 * `count` SDK clients following one session through `url`, each recording the seqs it is given
 * (after the SDK's own repair: the wire check beside it sees what the host sent).
 */
export class SdkFollowers {
  readonly observed: number[][] = [];
  readonly failures: unknown[] = [];
  readonly #clients: SessionmuxClient[] = [];
  readonly #subscriptions: Subscription[] = [];

  constructor(url: string, token: string, sessionId: string, count: number) {
    for (let i = 0; i < count; i++) {
      const client = createNodeClient({ url, token, backoff: { baseMs: 10, capMs: 100 } });
      this.#clients.push(client);
      const seqs: number[] = [];
      this.observed.push(seqs);
      this.#subscriptions.push(
        followSession(client, sessionId).subscribe({
          next: (update) => {
            if (update.kind === "events") for (const event of update.events) seqs.push(event.seq);
          },
          error: (error: unknown) => this.failures.push(error),
        }),
      );
    }
  }

  async close(): Promise<void> {
    for (const subscription of this.#subscriptions.splice(0)) subscription.unsubscribe();
    await Promise.all(this.#clients.splice(0).map((client) => client.close()));
  }
}
