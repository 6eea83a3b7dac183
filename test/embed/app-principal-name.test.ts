import { randomBytes } from "node:crypto";
import type { IncomingMessage } from "node:http";
import pg from "pg";
import { describe, expect, inject, it } from "vitest";
import { AppAuthentication } from "../../src/embed/app-authentication.js";
import { RefusalLog } from "../../src/embed/refusal-log.js";
import type { Principal } from "../../src/host/principal.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { capturedLogger } from "../support/log-capture.js";
import { mountedApp, upgradeStatus } from "./app-fixture.js";

/**
 * The name the app's `authenticate` returns owns every session it creates: it keeps to the names a
 * token entry or an in-process client may have (1-64 of letters, digits and `._@-`), or the
 * request is refused 401 and logged without the name.
 */

const pgUrl = inject("pgUrl");
const cleanups = cleanupsAfterEach();

/** `Bearer <n>`: the principal named by entry n of `names`. */
const namedBy = (names: string[]) => (req: IncomingMessage) => {
  const index = Number(/^Bearer (\d+)$/.exec(req.headers.authorization ?? "")?.[1]);
  const name = names[index];
  return name === undefined ? undefined : { name, admin: false };
};

describe("the name of an app's principal", () => {
  it("is not asked of no principal (undefined or null): a plain 401, no error logged", async () => {
    const { logger, lines } = capturedLogger();
    for (const answer of [undefined, null]) {
      const auth = new AppAuthentication(() => answer as Principal | undefined, new RefusalLog(logger));
      const request = { url: "/v1/usage", headers: {}, socket: {} } as IncomingMessage;
      expect(await auth.settle(request)).toBeNull();
      expect(auth.resolve(request)).toBeUndefined();
    }
    expect(lines).toEqual([]);
  });

  it("is refused 401 outside the principal names, and logged without it", async () => {
    const names = [
      "alice@example.com",
      "x".repeat(65),
      "alice\nadmin",
      "bob smith",
      "",
      "-dash",
      "a".repeat(64),
    ];
    const { logger, lines } = capturedLogger();
    const { authority } = await mountedApp(cleanups, { authenticate: namedBy(names), logger });
    const url = `ws://${authority}/chat/api/remote.mux`;
    const statuses = [];
    for (const index of names.keys())
      statuses.push(await upgradeStatus(url, { authorization: `Bearer ${index}` }));
    expect(statuses).toEqual([101, 401, 401, 401, 401, 401, 101]);
    const usage = await fetch(`http://${authority}/chat/v1/usage`, {
      headers: { authorization: "Bearer 1" },
    });
    expect(usage.status).toBe(401);
    const refusals = lines.filter((l) => String(l.msg).includes("whose name is not"));
    expect(refusals.length).toBeGreaterThan(0);
    // which request it was is said, by its path within the mount
    expect(refusals[0]).toMatchObject({ path: "/api/remote.mux" });
    expect(JSON.stringify(refusals)).not.toContain("xxxxxxxxxx");
  });

  it("is refused 401 when it is the admin token's name without being an admin, and said so", async () => {
    const { logger, lines } = capturedLogger();
    const { authority } = await mountedApp(cleanups, {
      authenticate: (req: IncomingMessage) => {
        const token = req.headers.authorization;
        if (token === "Bearer plain") return { name: "admin", admin: false };
        if (token === "Bearer operator") return { name: "admin", admin: true };
        return token === "Bearer other" ? { name: "admins", admin: false } : undefined;
      },
      logger,
    });
    const url = `ws://${authority}/chat/api/remote.mux`;
    expect(await upgradeStatus(url, { authorization: "Bearer plain" })).toBe(401);
    expect(await upgradeStatus(url, { authorization: "Bearer operator" })).toBe(101);
    expect(await upgradeStatus(url, { authorization: "Bearer other" })).toBe(101);
    expect(lines.filter((l) => String(l.msg).includes('named "admin"'))).toHaveLength(1);
  });

  it.skipIf(!pgUrl)(
    "of a few KiB is refused at the door, not failing every create on PostgreSQL",
    async () => {
      const schema = `app_name_${randomBytes(5).toString("hex")}`;
      cleanups.push(async () => {
        const client = new pg.Client({ connectionString: pgUrl! });
        await client.connect();
        await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await client.end();
      });
      // PostgreSQL refuses an index entry above about 2.7 KiB: the owner index of the session list
      const long = randomBytes(3000).toString("base64");
      const { authority } = await mountedApp(cleanups, {
        db: pgUrl!,
        dbSchema: schema,
        authenticate: namedBy([long]),
      });
      expect(
        await upgradeStatus(`ws://${authority}/chat/api/remote.mux`, { authorization: "Bearer 0" }),
      ).toBe(401);
    },
  );
});
