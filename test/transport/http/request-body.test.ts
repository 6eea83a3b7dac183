import { createServer, type IncomingMessage, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { readBody, readJsonObject } from "../../../src/transport/http/request-body.js";

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
  server = undefined;
});

/** A real server whose every request is read by `read`; its outcome (value or error) is handed out. */
async function serve<T>(read: (req: IncomingMessage) => Promise<T>) {
  const outcomes: Promise<{ value?: T; error?: unknown }>[] = [];
  let handled = 0;
  server = createServer((req, res) => {
    handled++;
    const outcome = read(req).then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    outcomes.push(outcome);
    void outcome.then(() => {
      res.writeHead(204, { connection: "close" });
      res.end();
    });
  });
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  /** Sends `parts` (chunked when `length` is undefined); `cut` destroys the request after them. */
  const send = (parts: Buffer[], options: { length?: number; cut?: boolean } = {}) => {
    const headers: Record<string, string> =
      options.length === undefined
        ? { "transfer-encoding": "chunked" }
        : { "content-length": String(options.length) };
    const req = request({ host: "127.0.0.1", port, path: "/", method: "POST", headers });
    req.on("error", () => undefined);
    req.on("response", (res) => res.resume());
    for (const part of parts) req.write(part);
    if (options.cut) {
      // once the server reads the request, go away without ending the body
      const seen = handled;
      const cut = async () => {
        while (handled === seen) await new Promise((resolve) => setTimeout(resolve, 5));
        req.destroy();
      };
      void cut();
    } else req.end();
  };
  const next = async () => {
    while (outcomes.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    return outcomes.shift()!;
  };
  return { send, next };
}

describe("readBody on a real request", () => {
  it("takes a body of exactly the limit, declared or chunked, and refuses one byte more", async () => {
    const { send, next } = await serve((req) => readBody(req, 100));
    send([Buffer.alloc(100, 1)], { length: 100 });
    expect((await next()).value).toEqual(Buffer.alloc(100, 1));
    send([Buffer.alloc(60, 2), Buffer.alloc(40, 3)]);
    expect((await next()).value).toEqual(Buffer.concat([Buffer.alloc(60, 2), Buffer.alloc(40, 3)]));
    send([Buffer.alloc(101)], { length: 101 });
    expect((await next()).error).toMatchObject({ code: "payload_too_large", message: "body over 100 bytes" });
    send([Buffer.alloc(60), Buffer.alloc(41)]);
    expect((await next()).error).toMatchObject({ code: "payload_too_large", message: "body over 100 bytes" });
  });

  it("a declared size over the limit is refused before any of the body is read", async () => {
    const { send, next } = await serve((req) => readBody(req, 100));
    // only 10 of the 101 declared bytes come, then the client goes away: the refusal came first
    send([Buffer.alloc(10)], { length: 101, cut: true });
    expect((await next()).error).toMatchObject({ code: "payload_too_large", message: "body over 100 bytes" });
  });

  it("keep: false reads the body to its end and gives an empty buffer", async () => {
    const { send, next } = await serve((req) => readBody(req, 100, false));
    send([Buffer.alloc(30, 1), Buffer.alloc(70, 1)]);
    expect((await next()).value).toEqual(Buffer.alloc(0));
    send([Buffer.alloc(101)], { length: 101 });
    expect((await next()).error).toMatchObject({ code: "payload_too_large" });
  });

  it("keep asked at each chunk: once it answers false, the body is read to its end and none of it kept", async () => {
    const sizes: number[] = [];
    const { send, next } = await serve((req) =>
      readBody(req, 1000, (size) => {
        sizes.push(size);
        return size <= 50;
      }),
    );
    send([Buffer.alloc(30, 1), Buffer.alloc(20, 1)]);
    expect((await next()).value).toEqual(Buffer.alloc(50, 1));
    sizes.length = 0;
    send([Buffer.alloc(30, 1), Buffer.alloc(30, 1), Buffer.alloc(30, 1)]);
    expect((await next()).value).toEqual(Buffer.alloc(0));
    // not asked again once it refused
    expect(sizes.at(-1)).toBeLessThanOrEqual(60);
  });

  it("a client that goes away mid-body ends the read with bad_request (the request's 'aborted' error)", async () => {
    const { send, next } = await serve((req) => readBody(req, 1000));
    send([Buffer.alloc(10)], { length: 500, cut: true });
    expect((await next()).error).toMatchObject({
      code: "bad_request",
      message: "body unreadable: aborted",
    });
  });

  it("readJsonObject: an object only; malformed, an array, a number, null or a string is bad_request", async () => {
    const { send, next } = await serve((req) => readJsonObject(req, 1000));
    send([Buffer.from('{"a":[1]}')]);
    expect((await next()).value).toEqual({ a: [1] });
    send([Buffer.from('{"a":')]);
    expect((await next()).error).toMatchObject({
      code: "bad_request",
      message: "body is not valid JSON",
      data: { field: "/" },
    });
    for (const body of ["[]", "42", "null", '"text"']) {
      send([Buffer.from(body)]);
      expect([body, (await next()).error]).toMatchObject([
        body,
        { code: "bad_request", message: "body must be a JSON object", data: { field: "/" } },
      ]);
    }
    send([Buffer.from("é", "latin1"), Buffer.from('{"é":1}')]);
    expect((await next()).error).toMatchObject({ code: "bad_request" });
    send([Buffer.from('{"é":1}')]);
    expect((await next()).value).toEqual({ é: 1 });
  });
});
