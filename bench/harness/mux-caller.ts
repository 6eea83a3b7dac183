import { once } from "node:events";
import WebSocket from "ws";
import { decode, encode } from "./shared-codec.js";

/** A bare client for unary mux calls: what any script speaking the wire does, without the SDK. */
export class MuxCaller {
  private nextId = 0;
  private readonly pending = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();

  private constructor(private readonly ws: WebSocket) {
    ws.on("message", (data: Buffer) => {
      const frame = decode(data) as { type: string; id?: number; value?: unknown; error?: { code: string } };
      if (frame.id === undefined) return;
      const waiter = this.pending.get(frame.id);
      if (!waiter) return;
      this.pending.delete(frame.id);
      if (frame.type === "result") waiter.resolve(frame.value);
      else waiter.reject(new Error(frame.error?.code ?? frame.type));
    });
    ws.on("close", () => {
      for (const waiter of this.pending.values()) waiter.reject(new Error("socket closed"));
      this.pending.clear();
    });
  }

  static async connect(url: string, token: string): Promise<MuxCaller> {
    const ws = new WebSocket(url, ["sessionmux.v1"], {
      headers: { authorization: `Bearer ${token}` },
      perMessageDeflate: false,
    });
    await once(ws, "open");
    return new MuxCaller(ws);
  }

  call(method: string, params: unknown): Promise<unknown> {
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.ws.send(encode({ type: "call", id, method, params }));
    });
  }

  close(): void {
    this.ws.terminate();
  }
}
