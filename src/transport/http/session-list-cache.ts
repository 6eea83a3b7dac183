import type { HostApi } from "../../host/host-api.js";
import type { Principal } from "../../host/principal.js";

/**
 * Encoded `GET /api/chat/sessions` answers, dropped on every commit of any session. The rows
 * it serves are pure projection fields (written in the commit transaction), so a commit notice
 * is the only thing that can change them (or the answer of a `resume` call forwarded to another
 * host, which `onAnyCommit` tells too: its owner's restore may be heard only after it). A read that overlapped a commit is not kept: the
 * generation it started under no longer matches. Answers are kept per principal name and rank:
 * a list is what that name owns (seen through that name's dismissals), or everything for an
 * admin, so an admin and an ordinary principal of the same name never share one. An app's own
 * `authenticate` makes a new principal object for every request, so an object would never hit.
 * @default 64 distinct (principal, limit, parked) keys
 */
export class SessionListCache {
  readonly #bodies = new Map<string, Map<string, Buffer>>();
  #size = 0;
  #generation = 0;

  constructor(
    host: Pick<HostApi, "onAnyCommit">,
    readonly capacity = 64,
  ) {
    host.onAnyCommit(() => {
      this.#generation++;
      // every session's every commit lands here: V8 allocates a new table for each Map.clear()
      if (this.#size > 0) this.#clear();
    });
  }

  async get(principal: Principal, key: string, compute: () => Promise<Buffer>): Promise<Buffer> {
    const who = `${principal.admin ? "admin" : "principal"}:${principal.name}`;
    const hit = this.#bodies.get(who)?.get(key);
    if (hit !== undefined) return hit;
    const generation = this.#generation;
    const body = await compute();
    if (generation === this.#generation) {
      if (this.#size >= this.capacity) this.#clear();
      let own = this.#bodies.get(who);
      if (!own) {
        own = new Map();
        this.#bodies.set(who, own);
      }
      if (!own.has(key)) this.#size++;
      own.set(key, body);
    }
    return body;
  }

  #clear(): void {
    this.#bodies.clear();
    this.#size = 0;
  }
}
