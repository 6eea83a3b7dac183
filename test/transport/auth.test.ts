import { IncomingMessage } from "node:http";
import { Socket } from "node:net";
import { describe, expect, test } from "vitest";
import {
  Authenticator,
  checkTokenSpecs,
  encodeBearerSubprotocol,
  parseTokenSpec,
  type TokenSpec,
} from "../../src/transport/auth.js";

/** A request as Node's HTTP server hands it over, with the given headers. */
function request(headers: Record<string, string>): IncomingMessage {
  const req = new IncomingMessage(new Socket());
  for (const [name, value] of Object.entries(headers)) req.headers[name.toLowerCase()] = value;
  return req;
}

const admin: TokenSpec = { name: "admin", secret: "root-secret", admin: true };
const alice: TokenSpec = { name: "alice", secret: "alice-secret", admin: false };
const bob: TokenSpec = { name: "bob", secret: "bob-secret", admin: false };
const bearer = (secret: string) => ({ authorization: `Bearer ${secret}` });

describe("token entries", () => {
  test("a bare value is the admin's secret; name=secret is a plain principal (the secret may hold =)", () => {
    expect(parseTokenSpec("T0k")).toEqual({ name: "admin", secret: "T0k", admin: true });
    expect(parseTokenSpec("=starts-with-eq")).toEqual({
      name: "admin",
      secret: "=starts-with-eq",
      admin: true,
    });
    expect(parseTokenSpec("alice=s=x")).toEqual({ name: "alice", secret: "s=x", admin: false });
  });

  test("a configuration that could mistake one entry for another is refused, naming the entry", () => {
    const refused = (tokens: TokenSpec[]) => {
      try {
        checkTokenSpecs(tokens);
      } catch (err) {
        return (err as Error).message;
      }
      return "accepted";
    };
    expect(refused([])).toBe("at least one token is required");
    expect(refused([{ name: "bad name", secret: "s", admin: false }])).toBe(
      "--token bad name=…: a principal name is 1-64 of letters, digits and ._@- starting with a letter or digit",
    );
    expect(refused([{ ...alice, name: "admin" }])).toMatch(/^--token admin=…: the name "admin" is reserved/);
    expect(refused([{ ...admin, secret: "" }])).toBe("the bare (admin) token: a secret is 1-4096 characters");
    expect(refused([{ ...alice, secret: "x".repeat(4097) }])).toBe(
      "--token alice=…: a secret is 1-4096 characters",
    );
    expect(refused([{ ...alice, secret: "x".repeat(4096) }])).toBe("accepted");
    // a header's token ends at whitespace: such a secret could never be presented as a bearer
    const whitespace = "a secret holds no whitespace, which no Authorization: Bearer header carries";
    expect(refused([{ ...admin, secret: "alice: s3cret" }])).toBe(`the bare (admin) token: ${whitespace}`);
    expect(refused([{ ...alice, secret: "s3cret\t" }])).toBe(`--token alice=…: ${whitespace}`);
    expect(refused([alice, { ...alice, secret: "other" }])).toBe(
      "--token alice=…: the name alice is used twice",
    );
    expect(refused([admin, { ...admin, secret: "other" }])).toBe(
      "more than one bare (admin) token: configure exactly one",
    );
    expect(refused([alice, { ...bob, secret: alice.secret }])).toBe(
      "--token bob=…: the same secret is configured twice",
    );
    expect(refused([admin, alice, bob])).toBe("accepted");
  });

  test("the token list is checked unless the app resolves principals itself and lists none", () => {
    expect(() => new Authenticator([])).toThrow("at least one token is required");
    expect(() => new Authenticator([], { resolve: () => undefined })).not.toThrow();
    expect(() => new Authenticator([alice, alice], { resolve: () => undefined })).toThrow("used twice");
  });

  test("the metrics token may be no principal's token", () => {
    const message = "the metrics token: it must differ from every principal's token";
    expect(() => new Authenticator([admin, alice], { metricsToken: alice.secret })).toThrow(message);
    expect(() => new Authenticator([admin, alice], { metricsToken: "metrics-only" })).not.toThrow();
    expect(() => new Authenticator([admin, alice], { metricsToken: "metrics only" })).toThrow(
      "the metrics token: a secret holds no whitespace, which no Authorization: Bearer header carries",
    );
  });
});

// Every Authenticator is made inside its test: one made while tests are collected would fail the
// whole file rather than a test when its constructor throws.
describe("who a secret names", () => {
  test("each configured secret names its own principal; any other names none", () => {
    const auth = new Authenticator([admin, alice, bob]);
    expect(auth.principalFor(bob.secret)).toEqual({ name: "bob", admin: false });
    expect(auth.principalFor(admin.secret)).toEqual({ name: "admin", admin: true });
    for (const secret of [undefined, "", "nobody", `${alice.secret} `])
      expect(auth.principalFor(secret)).toBeUndefined();
  });

  test("a secret of 4096 characters is looked up; a longer one is refused before any work", () => {
    const longest = { name: "carol", secret: "c".repeat(4096), admin: false };
    const withLongest = new Authenticator([longest]);
    expect(withLongest.principalFor(longest.secret)).toEqual({ name: "carol", admin: false });
    expect(withLongest.principalFor(`${longest.secret}c`)).toBeUndefined();
  });
});

describe("the bearer token of a request", () => {
  const tokenOf = (headers: Record<string, string>, allowSubprotocol = true) =>
    Authenticator.tokenOf(request(headers), { allowSubprotocol });

  test("Authorization: Bearer, in any case, with any spaces around the token", () => {
    expect(tokenOf({ authorization: "Bearer abc" })).toBe("abc");
    expect(tokenOf({ authorization: "bearer   abc  " })).toBe("abc");
    for (const header of ["Bearer abc def", "xBearer abc", "Bearer", "Basic abc", "Bearerabc"])
      expect(tokenOf({ authorization: header })).toBeUndefined();
  });

  test("an Authorization header decides, whatever the subprotocol says", () => {
    const proto = encodeBearerSubprotocol("from-proto");
    expect(tokenOf({ authorization: "Basic x", "sec-websocket-protocol": proto })).toBeUndefined();
    expect(tokenOf({ authorization: "Bearer from-header", "sec-websocket-protocol": proto })).toBe(
      "from-header",
    );
  });

  test("the bearer. subprotocol entry, only where allowed, within 8 KiB, in base64url", () => {
    const token = "tök/en+";
    const entry = encodeBearerSubprotocol(token);
    expect(entry.startsWith("bearer.")).toBe(true);
    expect(tokenOf({ "sec-websocket-protocol": `sessionmux.v1,  ${entry}` })).toBe(token);
    expect(tokenOf({ "sec-websocket-protocol": entry }, false)).toBeUndefined();
    expect(tokenOf({ "sec-websocket-protocol": "sessionmux.v1" })).toBeUndefined();
    expect(tokenOf({})).toBeUndefined();
    const padding = "p".repeat(8192 - entry.length - 1);
    expect(tokenOf({ "sec-websocket-protocol": `${padding},${entry}` })).toBe(token);
    expect(tokenOf({ "sec-websocket-protocol": `${padding}x,${entry}` })).toBeUndefined();
    for (const bad of ["%%YWJj", "YWJj%%", "YW Jj"])
      expect(tokenOf({ "sec-websocket-protocol": `bearer.${bad}` })).toBeUndefined();
  });
});

describe("origins", () => {
  test("no Origin (not a browser), a configured one in any case, or the request's own host", () => {
    const auth = new Authenticator([alice], { allowedOrigins: ["HTTPS://App.Example"] });
    const allowed = (headers: Record<string, string>) => auth.originAllowed(request(headers));
    expect(allowed({})).toBe(true);
    expect(allowed({ origin: "https://app.example" })).toBe(true);
    expect(allowed({ origin: "http://LOCALHOST:8080", host: "localhost:8080" })).toBe(true);
    expect(allowed({ origin: "https://localhost:8080", host: "LocalHost:8080" })).toBe(true);
    expect(allowed({ origin: "https://evil.example", host: "localhost:8080" })).toBe(false);
    expect(allowed({ origin: "https://localhost:8080" })).toBe(false);
    expect(allowed({ origin: "ftp://localhost:8080", host: "localhost:8080" })).toBe(false);
  });
});

describe("authenticate and metrics access", () => {
  test("refusals carry their status and code and are told to the log; acceptance names the principal", () => {
    const refused: string[] = [];
    const auth = new Authenticator([alice], { onRefused: (_req, code) => refused.push(code) });
    const own = { host: "localhost:1" };
    expect(auth.authenticate(request({ ...own, ...bearer("nope") }), { allowSubprotocol: true })).toEqual({
      ok: false,
      status: 401,
      code: "unauthorized",
    });
    expect(
      auth.authenticate(request({ ...own, ...bearer(alice.secret), origin: "https://evil.example" }), {
        allowSubprotocol: true,
      }),
    ).toEqual({ ok: false, status: 403, code: "forbidden_origin" });
    expect(refused).toEqual(["unauthorized", "forbidden_origin"]);
    expect(
      auth.authenticate(request({ ...own, ...bearer(alice.secret), origin: "http://localhost:1" }), {
        allowSubprotocol: false,
      }),
    ).toEqual({ ok: true, principal: { name: "alice", admin: false } });
  });

  test("without a refusal log a refusal is still answered", () => {
    const auth = new Authenticator([alice]);
    const opts = { allowSubprotocol: true };
    expect(auth.authenticate(request(bearer("nope")), opts)).toMatchObject({ status: 401 });
    expect(
      auth.authenticate(
        request({ ...bearer(alice.secret), origin: "https://evil.example", host: "h" }),
        opts,
      ),
    ).toMatchObject({ status: 403 });
  });

  test("/metrics: an admin or the metrics token, in the Authorization header only", () => {
    const auth = new Authenticator([admin, alice], { metricsToken: "metrics-only" });
    const access = (headers: Record<string, string>) => auth.metricsAccess(request(headers));
    expect(access(bearer("metrics-only"))).toBe("ok");
    expect(access(bearer(admin.secret))).toBe("ok");
    expect(access(bearer(alice.secret))).toBe("forbidden");
    expect(access(bearer("nope"))).toBe("unauthorized");
    expect(access({})).toBe("unauthorized");
    expect(access({ "sec-websocket-protocol": encodeBearerSubprotocol("metrics-only") })).toBe(
      "unauthorized",
    );
    expect(access({ "sec-websocket-protocol": encodeBearerSubprotocol(admin.secret) })).toBe("unauthorized");
  });

  test("/metrics without a metrics token configured: admins only", () => {
    const auth = new Authenticator([admin, alice]);
    expect(auth.metricsAccess(request(bearer(admin.secret)))).toBe("ok");
    expect(auth.metricsAccess(request(bearer(alice.secret)))).toBe("forbidden");
    expect(auth.metricsAccess(request(bearer("metrics-only")))).toBe("unauthorized");
  });

  test("/metrics: a metrics token past 4096 characters, or empty, is refused: no request is taken with it", () => {
    for (const metricsToken of ["m".repeat(4097), ""]) {
      expect(() => new Authenticator([admin], { metricsToken })).toThrow(
        "the metrics token: a secret is 1-4096 characters",
      );
    }
    const longest = "m".repeat(4096);
    expect(
      new Authenticator([admin], { metricsToken: longest }).metricsAccess(request(bearer(longest))),
    ).toBe("ok");
  });

  test("/metrics with the app's own authentication asks the app, not the token list", () => {
    const auth = new Authenticator([], {
      resolve: (req) =>
        req.headers["x-user"] === "ops" ? { name: "ops", admin: true } : { name: "u", admin: false },
      metricsToken: "metrics-only",
    });
    const access = (headers: Record<string, string>) => auth.metricsAccess(request(headers));
    expect(access({ "x-user": "ops" })).toBe("ok");
    expect(access({ "x-user": "someone" })).toBe("forbidden");
    expect(access(bearer("metrics-only"))).toBe("ok");
  });
});
