import { Limits, SessionmuxError } from "../../protocol/index.js";

/**
 * A search whose words match more messages than one search ranks (`Limits.maxSearchMatches`,
 * counted over the messages the search would rank: those of the searching principal's sessions, or
 * every one for a search with no owner). Both stores refuse it before ranking anything.
 */
export function searchTooBroad(): SessionmuxError {
  return new SessionmuxError(
    "search_too_broad",
    `these words match more than ${Limits.maxSearchMatches} messages; add words to narrow the search`,
    { data: { max: Limits.maxSearchMatches } },
  );
}
