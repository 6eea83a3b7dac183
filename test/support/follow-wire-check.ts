import { decodeFrame } from "../../protocol/codec.js";
import { WsFrameReader } from "./ws-frame-reader.js";

interface WireFrame {
  type?: string;
  id?: number;
  method?: string;
  params?: { afterSeq?: number };
  value?: { kind?: string; events?: { seq: number }[] };
}

const LIMITS = { maxStrBytes: 16 * 1024 * 1024, maxArrayLength: 1_000_000, maxValues: 2 ** 25 };

/**
 * The host's follow promise checked on the bytes it sent, before any client repairs them: on
 * every `session.follow` stream of every connection, the events continue the stream's `afterSeq`
 * one by one (a `reset` restarts at 1). A re-sent, skipped or reordered event is a violation even
 * if the SDK above would have deduplicated it.
 */
export class FollowWireCheck {
  readonly violations: string[] = [];
  /** Follow streams opened, over all connections. */
  streams = 0;
  /** Events the host put on the wire, over all streams. */
  events = 0;
  #connections = 0;

  /** A tap for one proxied connection (see `startTcpProxy`'s `tap`). */
  connection(): { fromClient(chunk: Buffer): void; fromHost(chunk: Buffer): void } {
    const connection = ++this.#connections;
    const lastSeq = new Map<number, number>();
    const fromClient = new WsFrameReader();
    const fromHost = new WsFrameReader();
    return {
      fromClient: (chunk) => {
        for (const message of fromClient.push(chunk)) {
          const frame = decodeFrame(message, LIMITS) as WireFrame;
          if (frame.type === "open" && frame.method === "session.follow" && frame.id !== undefined) {
            this.streams++;
            lastSeq.set(frame.id, frame.params?.afterSeq ?? 0);
          }
        }
      },
      fromHost: (chunk) => {
        for (const message of fromHost.push(chunk)) {
          const frame = decodeFrame(message, LIMITS) as WireFrame;
          if (frame.type !== "item" || frame.id === undefined || !lastSeq.has(frame.id)) continue;
          if (frame.value?.kind === "reset") lastSeq.set(frame.id, 0);
          for (const { seq } of frame.value?.kind === "events" ? (frame.value.events ?? []) : []) {
            this.events++;
            const last = lastSeq.get(frame.id)!;
            if (seq !== last + 1)
              this.violations.push(`connection ${connection} stream ${frame.id}: seq ${seq} after ${last}`);
            lastSeq.set(frame.id, seq);
          }
        }
      },
    };
  }
}
