import { firstValueFrom, lastValueFrom, toArray } from "rxjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { controlMirror } from "../../src/client/control-mirror.js";
import { followSession } from "../../src/client/follow-session.js";
import { createNodeClient, type SessionmuxClient } from "../../src/client/node.js";
import { RemoteError, shouldRetry } from "../../src/client/remote-errors.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";

let host: TestHost;
let client: SessionmuxClient;
beforeAll(async () => {
  host = await startTestHost();
  client = createNodeClient({ url: host.wsUrl, token: ADMIN_TOKEN });
});
afterAll(async () => {
  await client?.close();
  await host?.dispose();
});

describe("errors from a real host", () => {
  it("a business refusal is a terminal RemoteError with code and category", async () => {
    await client.create({ sessionId: "dup" });
    const error = await client.create({ sessionId: "dup" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RemoteError);
    expect(error).toMatchObject({
      code: "session_exists",
      category: "business",
      terminal: true,
      retryable: false,
    });
    expect(shouldRetry(error)).toBe(false);
  });

  it("bad params are a protocol RemoteError naming the field", async () => {
    const error = await client.page({ sessionId: "../.." }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "bad_request", category: "protocol", terminal: true });
    expect((error as RemoteError).data).toMatchObject({ field: expect.stringContaining("sessionId") });
  });

  it("followSession ends with the terminal error of an unknown session instead of retrying", async () => {
    const error = await lastValueFrom(followSession(client, "missing").pipe(toArray())).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(RemoteError);
    expect(error).toMatchObject({ code: "session_not_found", category: "business" });
  });

  it("followSession reports a cursor ahead of the head as terminal", async () => {
    const { header } = await client.create({ sessionId: "ahead" });
    const error = await lastValueFrom(
      followSession(client, "ahead", { afterSeq: 50, epoch: header.epoch }).pipe(toArray()),
    ).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "cursor_ahead" });
  });

  it("follow and control complete quietly when their client is closed", async () => {
    const own = createNodeClient({ url: host.wsUrl, token: ADMIN_TOKEN });
    await own.create({ sessionId: "quiet" });
    const follow = followSession(own, "quiet");
    const followed = lastValueFrom(follow.pipe(toArray()));
    const mirror = controlMirror(own);
    const mirrored = lastValueFrom(mirror.pipe(toArray()));
    await firstValueFrom(mirror);
    await own.close();
    await expect(followed).resolves.toBeInstanceOf(Array);
    await expect(mirrored).resolves.toBeInstanceOf(Array);
  });
});
