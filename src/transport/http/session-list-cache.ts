import type { SessionStore } from "../../store/session-store.js";

/**
 * Encoded `GET /api/chat/sessions` answers, dropped on every commit of any session. The rows
 * it serves are pure projection fields (written in the commit transaction), so a commit notice
 * is the only thing that can change them. A read that overlapped a commit is not kept: the
 * generation it started under no longer matches.
 * @default 64 distinct (principal, limit, parked) keys
 */
export class SessionListCache {
  readonly #bodies = new Map<string, Buffer>();
  #generation = 0;

  constructor(
    store: SessionStore,
    readonly capacity = 64,
  ) {
    store.subscribeAll(() => {
      this.#generation++;
      this.#bodies.clear();
    });
  }

  async get(key: string, compute: () => Promise<Buffer>): Promise<Buffer> {
    const hit = this.#bodies.get(key);
    if (hit !== undefined) return hit;
    const generation = this.#generation;
    const body = await compute();
    if (generation === this.#generation) {
      if (this.#bodies.size >= this.capacity) this.#bodies.clear();
      this.#bodies.set(key, body);
    }
    return body;
  }
}
