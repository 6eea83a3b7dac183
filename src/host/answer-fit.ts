import { type InteractionKind, type Resolution, SessionmuxError } from "../../protocol/index.js";

/**
 * An answer fits its interaction's kind: an approval takes `{outcome}`, a question `{answer}`.
 * Across kinds an agent would read an approval answered in words as a denial, and a question's
 * answer as the word "approve": the caller meant something the host cannot carry out.
 */
export function assertAnswerFits(kind: InteractionKind, interactionId: string, response: Resolution): void {
  if (kind === "approval" && "answer" in response) {
    throw new SessionmuxError(
      "bad_request",
      `response: interaction ${interactionId} is an approval; answer it with {outcome: "approve"} or {outcome: "deny"}`,
      { data: { field: "/response" } },
    );
  }
  if (kind === "question" && "outcome" in response) {
    throw new SessionmuxError(
      "bad_request",
      `response: interaction ${interactionId} is a question; answer it with {answer: "<text>"}`,
      { data: { field: "/response" } },
    );
  }
}
