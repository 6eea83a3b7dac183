import { APICallError, RetryError } from "ai";
import { describe, expect, test } from "vitest";
import { AgentLimitError } from "../../src/agents/agent-limits.js";
import { describeFailure } from "../../src/agents/failure-cause.js";

const url = "http://127.0.0.1:9/v1/chat/completions";

function refused(statusCode: number | undefined, responseBody?: string, cause?: unknown): APICallError {
  return new APICallError({
    message: "Internal Server Error",
    url,
    requestBodyValues: {},
    ...(statusCode !== undefined ? { statusCode } : {}),
    ...(responseBody !== undefined ? { responseBody } : {}),
    ...(cause !== undefined ? { cause } : {}),
  });
}

function chain(...messages: string[]): Error {
  let err: Error | undefined;
  for (const message of messages.reverse()) err = new Error(message, err ? { cause: err } : undefined);
  return err as Error;
}

describe("describeFailure", () => {
  test("a limit the model went past is its own message, not a model call failure", () => {
    const err = new AgentLimitError("too_many_steps", 16, "the model needed more than 16 steps in one turn");
    expect(describeFailure(err)).toBe("too_many_steps: the model needed more than 16 steps in one turn");
  });

  test("a refusal names its status, its endpoint and its body, trimmed", () => {
    expect(describeFailure(refused(500, '  {"error":"boom"}\n'))).toBe(
      `model call failed: HTTP 500 from ${url}: {"error":"boom"}`,
    );
    expect(describeFailure(refused(400, "bad request"))).toBe(
      `model call failed: HTTP 400 from ${url}: bad request`,
    );
  });

  test("a refusal's body is cut to its first 500 characters", () => {
    const body = `${"a".repeat(499)}bc${"d".repeat(100)}`;
    expect(describeFailure(refused(503, body))).toBe(
      `model call failed: HTTP 503 from ${url}: ${"a".repeat(499)}b`,
    );
  });

  test("a cut never ends in half a character: one that would is left out whole", () => {
    const emoji = "\u{1F600}"; // two UTF-16 units
    const split = describeFailure(refused(503, `${"a".repeat(499)}${emoji}tail`));
    expect(split).toBe(`model call failed: HTTP 503 from ${url}: ${"a".repeat(499)}`);
    const whole = describeFailure(refused(503, `${"a".repeat(498)}${emoji}tail`));
    expect(whole).toBe(`model call failed: HTTP 503 from ${url}: ${"a".repeat(498)}${emoji}`);
  });

  test("a refusal with no body, or only whitespace, names the error and its causes instead", () => {
    expect(describeFailure(refused(502))).toBe(
      `model call failed: HTTP 502 from ${url}: Internal Server Error`,
    );
    expect(describeFailure(refused(502, "  \n ", new Error("upstream reset")))).toBe(
      `model call failed: HTTP 502 from ${url}: Internal Server Error: upstream reset`,
    );
  });

  test("a response that broke while read (no status, or below 400) names the endpoint and the causes", () => {
    const broke = refused(undefined, undefined, chain("terminated", "other side closed"));
    expect(describeFailure(broke)).toBe(
      `model call failed: ${url}: Internal Server Error: terminated: other side closed`,
    );
    expect(describeFailure(refused(399, "ignored body"))).toBe(
      `model call failed: ${url}: Internal Server Error`,
    );
    expect(describeFailure(refused(200, "ignored body"))).toBe(
      `model call failed: ${url}: Internal Server Error`,
    );
  });

  test("retries give up with the last error and how many attempts were made", () => {
    const errors = [refused(500, "first"), refused(500, "second"), refused(429, "slow down")];
    const err = new RetryError({ message: "Failed after 3 attempts", reason: "maxRetriesExceeded", errors });
    expect(describeFailure(err)).toBe(
      `model call failed: HTTP 429 from ${url}: slow down (after 3 attempts)`,
    );
  });

  test("any other error is followed down at most four causes, each message once", () => {
    expect(describeFailure(chain("fetch failed", "connect ECONNREFUSED"))).toBe(
      "model call failed: fetch failed: connect ECONNREFUSED",
    );
    expect(describeFailure(chain("a", "b", "c", "d", "e"))).toBe("model call failed: a: b: c: d");
    // a wrapper that repeats its cause's message says it once
    expect(describeFailure(chain("terminated", "terminated", "other side closed"))).toBe(
      "model call failed: terminated: other side closed",
    );
  });

  test("an error with no message is named by its type; a cause that is not an error is shown as it is", () => {
    expect(describeFailure(new TypeError())).toBe("model call failed: TypeError");
    expect(describeFailure(new Error("socket hang up", { cause: "ECONNRESET" }))).toBe(
      "model call failed: socket hang up: ECONNRESET",
    );
    expect(describeFailure("boom")).toBe("model call failed: boom");
    // null ends the chain like undefined; a thrown plain object's own fields are not followed
    expect(describeFailure(new Error("closed", { cause: null }))).toBe("model call failed: closed");
    expect(describeFailure({ cause: new Error("hidden") })).toBe("model call failed: [object Object]");
  });
});
