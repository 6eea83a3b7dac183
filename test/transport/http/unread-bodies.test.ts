import { once } from "node:events";
import { connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { AttackHost, Canary, mib, report } from "../../support/attack-host.js";
import { ADMIN_TOKEN } from "../../support/host.js";
import { until } from "../../support/until.js";

const MIB = 1024 * 1024;
const CONNECTIONS = 5;
const PIPELINED = 40;
/**
 * Each connection: its backlog (under the 4 MiB high-water mark) plus one 256 KiB chunk of the body
 * it streams, never a whole body: about 22 MiB for 5, with slack for a noisy machine.
 */
const RSS_BOUND = 48 * MIB;

let host: AttackHost | undefined;
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await host?.dispose();
  host = undefined;
});

describe("HTTP: pipelined requests for a large body on connections that are never read (§8)", () => {
  it(`${CONNECTIONS} connections x ${PIPELINED} GET /v1/attachments/{id}: memory bounded, others served`, async () => {
    host = await AttackHost.start();
    const attachmentId = await host.upload(10 * MIB);
    const canary = await Canary.start(host);
    const request =
      `GET /v1/attachments/${attachmentId} HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
      `Authorization: Bearer ${ADMIN_TOKEN}\r\n\r\n`;

    const measured = await host.measure(async () => {
      await canary.stream(60, 25);
      for (let i = 0; i < CONNECTIONS; i++) {
        const socket = connect(host!.cli.port, "127.0.0.1");
        sockets.push(socket);
        socket.on("error", () => {});
        await once(socket, "connect");
        socket.pause();
        socket.write(request.repeat(PIPELINED));
      }
      return canary.check();
    });
    report(
      `unread HTTP bodies (${CONNECTIONS} x ${PIPELINED} x 10 MiB)`,
      measured,
      `, bound ${mib(RSS_BOUND)} MiB`,
    );
    expect(measured.result).toBeGreaterThan(60);
    expect(measured.rssGrowth).toBeLessThan(RSS_BOUND);

    // Nothing refused: a connection that reads gets all its answers, in order.
    const reader = sockets[0]!;
    let received = 0;
    reader.on("data", (chunk: Buffer) => {
      received += chunk.length;
    });
    reader.resume();
    await until(() => received >= PIPELINED * 10 * MIB, 120_000, "every pipelined answer");
    await canary.dispose();
  }, 180_000); // 400 MiB streamed chunk by chunk once read: slow on a loaded 2-core machine
});
