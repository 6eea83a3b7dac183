import { type Backend, storeFixture } from "./backends.js";

/**
 * For the lease tests: two writers on one database, with session `sessionId` (owner `alice`)
 * created, from a fresh store per call: two instances where the backend allows, else one shared.
 * Call it where `storeFixture` may be called (inside `describeContract`).
 */
export function leaseWriters(backend: Backend, sessionId: string) {
  const open = storeFixture(backend);
  return async () => {
    const under = await open();
    const a = under.store;
    const b = backend.sharedWriters ? await under.openAnother() : a;
    await a.create({ sessionId, owner: "alice", model: "m" });
    return { a, b };
  };
}
