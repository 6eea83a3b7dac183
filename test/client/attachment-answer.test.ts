import { describe, expect, it } from "vitest";
import { hostPerTest } from "../support/use-test-host.js";

const MIB = 1024 * 1024;

const startHost = hostPerTest();

describe("the SDK reads a session.attachment answer the host streams (protocol-v1 §4)", () => {
  it("a 10 MiB body, sent chunk by chunk as the socket takes it, arrives whole and exact", async () => {
    const { host, client } = await startHost();
    const { header } = await client.call("session.create", {});
    const bytes = new Uint8Array(10 * MIB).map((_, i) => (i * 31) % 251);
    const attachmentId = await host.store.putAttachment({
      owner: "admin",
      name: "big.bin",
      type: "x/y",
      bytes,
    });
    const [first, second] = await Promise.all([
      client.call("session.attachment", { sessionId: header.sessionId, attachmentId }),
      client.call("session.attachment", { sessionId: header.sessionId, attachmentId }),
    ]);
    for (const answer of [first, second]) {
      expect({ name: answer.name, type: answer.type, size: answer.size }).toEqual({
        name: "big.bin",
        type: "x/y",
        size: 10 * MIB,
      });
      expect(Buffer.from(answer.bytes).equals(Buffer.from(bytes))).toBe(true);
    }
  });
});
