import { SessionmuxError } from "../../protocol/index.js";

/** What a write to a store that was closed is refused with: the host it served is shutting down. */
export function storeClosed(): SessionmuxError {
  return new SessionmuxError("host_shutting_down", "the session store is closed");
}
