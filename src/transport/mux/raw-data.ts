import type WebSocket from "ws";

/** The bytes of one `ws` message, whichever of its three shapes `ws` delivered it in. */
export function rawDataBytes(data: WebSocket.RawData): Uint8Array {
  if (Array.isArray(data)) return Buffer.concat(data);
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  return data;
}
