import { once } from "node:events";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { decodeFrame, encodeFrame } from "../../../protocol/codec.js";
import { AttackHost, Canary, mib, report } from "../../support/attack-host.js";
import { ADMIN_TOKEN } from "../../support/host.js";
import { until } from "../../support/until.js";

const MIB = 1024 * 1024;
const CALLS = 40;
/**
 * High-water mark (4 MiB) + the one 256 KiB chunk being sent: an answer's body is read from the
 * store only as the socket takes it. Peak resident memory gets slack for garbage not yet collected;
 * 609 MiB before any bound, 84 MiB while answers were copied into the encoder, 42–65 MiB while each
 * running answer was read whole before it was sent.
 */
const RSS_BOUND = 24 * MIB;
const HELD_BOUND = 8 * MIB;

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
    let last: Buffer | undefined;
    attacker.on("message", (data: Buffer) => {
      answers++;
      last = data;
    });
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
    expect(measured.heldGrowth).toBeLessThan(HELD_BOUND);

    // Nothing was lost: once the attacker reads, every call is answered.
    attacker.resume();
    await until(() => answers === CALLS + 1, 60_000, "every answer once the socket is read");
    const answer = decodeFrame(last!, { maxBinBytes: 16 * MIB }) as {
      id: number;
      value: { bytes: Uint8Array };
    };
    expect(answer.id).toBeLessThanOrEqual(CALLS);
    expect(Buffer.from(answer.value.bytes).equals(Buffer.alloc(10 * MIB, 1))).toBe(true);
    attacker.terminate();
    await canary.dispose();
  }, 180_000);
});
