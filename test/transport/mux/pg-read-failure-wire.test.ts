import { randomBytes } from "node:crypto";
import { describe, expect, inject, it } from "vitest";
import { SessionmuxError } from "../../../protocol/index.js";
import { createNodeClient } from "../../../src/client/node.js";
import { startHost } from "../../../src/server.js";
import { dropSchema } from "../../store/contract/backends.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { ALICE_TOKEN, TEST_TOKENS } from "../../support/host.js";
import { startTcpProxy } from "../../support/tcp-proxy.js";

/**
 * A host on PostgreSQL whose database cannot be reached: a read a client asks for (a session
 * list over the socket, the HTTP session index) is answered `persistence_failure`, retryable, 503,
 * not `internal_error`, which a client would take for a fault of its call and not retry.
 */

const pgUrl = inject("pgUrl") ?? "";
const cleanups = cleanupsAfterEach();

describe.skipIf(!pgUrl)("a read on a host whose database cannot be reached", () => {
  it("is answered persistence_failure over the socket and over HTTP", async () => {
    const url = new URL(pgUrl);
    const proxy = await startTcpProxy(Number(url.port || 5432));
    cleanups.push(() => proxy.stop());
    url.hostname = "127.0.0.1";
    url.port = String(proxy.port);
    const schema = `read_failure_wire_${randomBytes(4).toString("hex")}`;
    cleanups.push(() => dropSchema(pgUrl, schema));
    const host = await startHost({
      port: 0,
      host: "127.0.0.1",
      dbPath: url.toString(),
      dbSchema: schema,
      dbPoolSize: 2,
      hostId: "host-a",
      tokens: TEST_TOKENS,
    });
    cleanups.push(() => host.close());
    const client = createNodeClient({ url: host.wsUrl, token: ALICE_TOKEN });
    cleanups.push(() => client.close());
    await client.call("session.create", {});
    expect((await client.list({ limit: 10 })).sessions).toHaveLength(1);

    await proxy.stop();

    const failed = await client.list({ limit: 10 }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failed).toBeInstanceOf(SessionmuxError);
    expect({
      code: (failed as SessionmuxError).code,
      retryable: (failed as SessionmuxError).retryable,
    }).toEqual({
      code: "persistence_failure",
      retryable: true,
    });
    const res = await fetch(`${host.url}/api/chat/sessions?limit=10`, {
      headers: { authorization: `Bearer ${ALICE_TOKEN}` },
    });
    expect({ status: res.status, body: await res.json() }).toMatchObject({
      status: 503,
      body: { error: "persistence_failure" },
    });
  }, 30_000);
});
