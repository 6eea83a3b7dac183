import { once } from "node:events";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { encodeFrame } from "../../../protocol/codec.js";
import { AttackHost, Canary, mib, report } from "../../support/attack-host.js";
import { ADMIN_TOKEN } from "../../support/host.js";
import { until } from "../../support/until.js";

const MIB = 1024 * 1024;
const CALLS = 40;
/**
 * High-water mark (4 MiB) + 4 running answers of a 10 MiB attachment, each held once (read chunk by
 * chunk into one buffer, sent beside the frame's encoding): about 44 MiB, with slack for a noisy
 * machine; 609 MiB before any bound, 84 MiB while answers were copied into the encoder.
 */
const RSS_BOUND = 100 * MIB;

let host: AttackHost | undefined;
afterEach(async () => {
  await host?.dispose();
  host = undefined;
});

describe("a socket that sends calls and never reads their answers (protocol-v1 §7, §9)", () => {
  it(`${CALLS} calls for a 10 MiB attachment: host memory stays bounded, others are served`, async () => {
    host = await AttackHost.start();
    const attachmentId = await host.upload(10 * MIB);
    const canary = await Canary.start(host);

    const attacker = new WebSocket(host.wsUrl, ["sessionmux.v1"], {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      perMessageDeflate: false,
      maxPayload: 64 * MIB,
    });
    let answers = 0;
    attacker.on("message", () => answers++);
    await once(attacker, "open");
    await until(() => answers === 1, 10_000, "hello");
    attacker.pause();

    const measured = await host.measure(async () => {
      await canary.stream(60, 25);
      for (let id = 1; id <= CALLS; id++) {
        const params = { sessionId: canary.sessionId, attachmentId };
        attacker.send(encodeFrame({ type: "call", id, method: "session.attachment", params }));
      }
      return canary.check();
    });
    report(`unread answers (${CALLS} calls x 10 MiB)`, measured, `, bound ${mib(RSS_BOUND)} MiB`);
    expect(measured.result).toBeGreaterThan(60);
    expect(measured.rssGrowth).toBeLessThan(RSS_BOUND);

    // Nothing was lost: once the attacker reads, every call is answered.
    attacker.resume();
    await until(() => answers === CALLS + 1, 60_000, "every answer once the socket is read");
    attacker.terminate();
    await canary.dispose();
  }, 180_000);
});
