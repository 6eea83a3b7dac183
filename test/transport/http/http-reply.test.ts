import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { SessionmuxError } from "../../../protocol/index.js";
import { fail, sendError, sendJsonParts } from "../../../src/transport/http/http-reply.js";

const servers: Server[] = [];
/** Errors thrown while replying: the client is cut off at once, and the test fails on them. */
const thrown: unknown[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
  expect(thrown.splice(0)).toEqual([]);
});

/** A real server answering every request with `reply`; returns what a client receives. */
async function answer(reply: (res: ServerResponse) => void) {
  const server = createServer((_req, res) => {
    try {
      reply(res);
    } catch (err) {
      thrown.push(err);
      res.destroy();
    }
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
}

async function refusalOf(err: SessionmuxError) {
  const res = await answer((r) => sendError(r, err));
  return { status: res.status, body: (await res.json()) as unknown };
}

describe("HTTP refusal bodies (protocol-v1 §8)", () => {
  it("each code carries exactly its table's fields under their snake_case names; the message only for bad_request; never an id", async () => {
    const cases: [SessionmuxError, number, Record<string, unknown>][] = [
      [
        fail("bad_request", "limit must be a whole number from 1 to 500", { field: "limit" }),
        400,
        { field: "limit", message: "limit must be a whole number from 1 to 500" },
      ],
      [
        fail("interaction_already_resolved", "answered", {
          sessionId: "s1",
          interactionId: "i1",
          resolution: { outcome: "approve" },
        }),
        409,
        { winner: { outcome: "approve" } },
      ],
      [fail("epoch_mismatch", "reload", { sessionId: "s1", epoch: "E2" }), 409, { epoch: "E2" }],
      [
        fail("cursor_ahead", "past the head", { afterSeq: 9, headSeq: 4, epoch: "E1" }),
        409,
        { head_seq: 4, epoch: "E1" },
      ],
      [
        fail("transcript_too_large", "too large", { sessionId: "s1", maxDataBytes: 1024 }),
        409,
        { max_data_bytes: 1024 },
      ],
      [
        fail("storage_quota_exceeded", "full", { principal: "alice", maxBytes: 12_000, storedBytes: 11_500 }),
        413,
        { max_bytes: 12_000, stored_bytes: 11_500 },
      ],
      [fail("upload_quota_exceeded", "uploads full", { limit: 3 }), 413, { max_bytes: 3 }],
      // a code without body fields: another principal's session answers like a missing one
      [fail("session_not_found", "no session s1", { sessionId: "s1" }), 404, {}],
    ];
    for (const [err, status, fields] of cases) {
      expect(await refusalOf(err)).toEqual({ status, body: { error: err.code, ...fields } });
    }
  });

  it("a field the refusal's data lacks is left out; data that is null or not an object adds nothing", async () => {
    const partial = await refusalOf(fail("storage_quota_exceeded", "full", { maxBytes: 10 }));
    expect(partial.body).toEqual({ error: "storage_quota_exceeded", max_bytes: 10 });
    // a falsy value is still a value
    const zero = await refusalOf(fail("cursor_ahead", "past the head", { headSeq: 0, epoch: "" }));
    expect(zero.body).toEqual({ error: "cursor_ahead", head_seq: 0, epoch: "" });
    for (const data of [null, "limit", 7]) {
      const refused = await refusalOf(new SessionmuxError("bad_request", "odd data", { data }));
      expect(refused).toEqual({ status: 400, body: { error: "bad_request", message: "odd data" } });
    }
    const bare = await refusalOf(fail("bad_request", "no data"));
    expect(bare.body).toEqual({ error: "bad_request", message: "no data" });
  });

  it("fail keeps the data it is given and none when given none", () => {
    expect(fail("bad_request", "m", { field: "x" })).toMatchObject({
      code: "bad_request",
      message: "m",
      data: { field: "x" },
    });
    expect(fail("not_found", "m").data).toBeUndefined();
  });

  it("a refusal after the status was sent cuts the response instead of writing a second one", async () => {
    const res = await answer((r) => {
      r.writeHead(200, { "content-type": "application/json; charset=utf-8", "content-length": 100 });
      r.write('{"events":[');
      // the status and the first bytes are on the wire when the failure comes
      setImmediate(() => {
        try {
          sendError(r, fail("internal_error", "the read failed"));
        } catch (err) {
          thrown.push(err);
          r.destroy();
        }
      });
    });
    expect(res.status).toBe(200);
    await expect(res.text()).rejects.toThrow();
  });
});

describe("JSON answers", () => {
  it("a body of several encoded parts is sent whole, with their summed length, uncached", async () => {
    const parts = ['{"a":', '"é",', '"b":[1,2]}'].map((p) => Buffer.from(p, "utf8"));
    // the response must finish, not just carry its length: request metrics and keep-alive wait for it
    let finished!: Promise<void>;
    const res = await answer((r) => {
      finished = new Promise((resolve) => r.on("finish", resolve));
      sendJsonParts(r, 201, parts);
    });
    expect(res.status).toBe(201);
    expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(res.headers.get("content-length")).toBe(String(Buffer.concat(parts).length));
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(await res.json()).toEqual({ a: "é", b: [1, 2] });
    await finished;

    const one = await answer((r) => sendJsonParts(r, 200, [Buffer.from('{"one":true}')]));
    expect(one.headers.get("content-length")).toBe("12");
    expect(await one.json()).toEqual({ one: true });
  });
});
