import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Limits } from "../../../protocol/limits.js";
import { JSON_BODY_MAX_VALUES, jsonValuesOver } from "../../../src/transport/http/json-values.js";
import { ALICE_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { ALICE, api, newSession } from "./http-client.js";

/**
 * The values an HTTP JSON body may hold (protocol-v1 §8, 4,096, object keys and containers
 * included), counted before the body is parsed: past them a body is 400 `bad_request` whatever
 * else it holds. Each body below is a valid `seen` body but for its padding, which the route
 * ignores: without the bound it is parsed whole and answered 200.
 */

let h: TestHost;
let sessionId: string;
beforeAll(async () => {
  h = await startTestHost();
  sessionId = await newSession(h, ALICE);
});
afterAll(async () => {
  await h?.dispose();
});

const seen = (body: string) =>
  api(h, `/v1/sessions/${sessionId}/seen`, { method: "POST", token: ALICE_TOKEN, body });

/** `{"completion_settled_at_ms":0,"pad":…}`: 5 values and those of `pad`'s own beyond one. */
const padded = (pad: string) => `{"completion_settled_at_ms":0,"pad":${pad}}`;

const keys = (n: number) =>
  `{${Array.from({ length: n }, (_, i) => `"k${String(i).padStart(7, "0")}":1`).join(",")}}`;

describe("an HTTP JSON body holding more values than the bound", () => {
  it.each([
    ["one object of 75,000 keys", padded(keys(75_000))],
    ["arrays nested 500,000 deep", padded(`${"[".repeat(500_000)}${"]".repeat(500_000)}`)],
    ["an array of 500,000 numbers", padded(`[${new Array(500_000).fill(0).join(",")}]`)],
  ])("%s (under 1 MiB) → 400 bad_request, field /; the next request is answered", async (_name, body) => {
    expect(Buffer.byteLength(body)).toBeLessThan(Limits.maxHttpBodyBytes);
    const refused = await seen(body);
    expect(refused.status).toBe(400);
    expect(refused.json).toEqual({
      error: "bad_request",
      field: "/",
      message: `body holds more than ${JSON_BODY_MAX_VALUES} JSON values`,
    });
    const next = await seen(padded("0"));
    expect(next.status).toBe(200);
  });

  it("at the bound a body is parsed; one value more is refused", async () => {
    // `pad` an array of n numbers: 5 values before it, then the array and its items
    const withItems = (n: number) => padded(`[${new Array(n).fill(0).join(",")}]`);
    const items = JSON_BODY_MAX_VALUES - 5;
    expect((await seen(withItems(items))).status).toBe(200);
    expect((await seen(withItems(items + 1))).status).toBe(400);
  });

  it("punctuation inside strings, escaped quotes included, is no value", async () => {
    const text = JSON.stringify(`\\",:[{`.repeat(20_000));
    expect((await seen(padded(text))).status).toBe(200);
  });
});

describe("jsonValuesOver counts values, object keys and containers included", () => {
  const count = (text: string) => {
    const bytes = Buffer.from(text);
    let n = 0;
    while (jsonValuesOver(bytes, n)) n++;
    return n;
  };

  it.each([
    ["1", 1],
    ['"a,b:c"', 1],
    ["[]", 1],
    ["{ }", 1],
    ["[1, 2, 3]", 4],
    ['{"a":[1]}', 4],
    ['{"a":1,"b":{}}', 5],
    ["[[[]]]", 3],
    ['[ "\\"]", [ ] ]', 3],
    // JSON's four whitespace bytes, each between a container and its closer
    ["[\t]", 1],
    ["[\n]", 1],
    ["{\r\n}", 1],
    // text that is no JSON, counted as far as it goes: an opener at its very end opens nothing yet
    ["[", 1],
  ])("%s holds %i", (text, values) => {
    expect(count(text)).toBe(values);
  });
});
