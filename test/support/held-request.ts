import { connect } from "node:net";
import { until } from "./until.js";

/** A request whose body has been sent but for its last byte. */
export interface HeldRequest {
  /** Sends the last byte (and a chunked body's end); answers the reply's status and JSON body. */
  finish(): Promise<{ status: number; body: unknown }>;
}

/** A body part as sent: as it is, or as one chunk of a chunked body. */
function framed(part: Buffer, chunked: boolean): Buffer {
  return chunked
    ? Buffer.concat([Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from("\r\n")])
    : part;
}

/**
 * A POST of `body` on a connection of its own, with its size declared or chunked, that sends all of
 * it but the last byte (in parts of 64 KiB, each once the socket took the one before) and waits
 * there: what a client sending many bodies at once makes the host hold.
 */
export async function heldRequest(
  port: number,
  options: { path: string; token: string; contentType: string; body: Buffer; chunked: boolean },
): Promise<HeldRequest> {
  const { body, chunked } = options;
  const socket = connect(port, "127.0.0.1");
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  let reply = "";
  socket.on("data", (chunk: Buffer) => {
    reply += chunk.toString("latin1");
  });
  const length = chunked ? "Transfer-Encoding: chunked" : `Content-Length: ${body.length}`;
  socket.write(
    `POST ${options.path} HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer ${options.token}\r\n` +
      `Content-Type: ${options.contentType}\r\n${length}\r\n\r\n`,
  );
  const last = body.length - 1;
  for (let at = 0; at < last; at += 64 * 1024) {
    const part = body.subarray(at, Math.min(at + 64 * 1024, last));
    if (!socket.write(framed(part, chunked))) await new Promise((resolve) => socket.once("drain", resolve));
  }
  return {
    async finish() {
      socket.write(framed(body.subarray(last), chunked));
      if (chunked) socket.write("0\r\n\r\n");
      const [, status, json] = await until(
        () => /^HTTP\/1\.1 (\d{3})[\s\S]*?\r\n\r\n(\{.*\})$/.exec(reply) ?? undefined,
        20_000,
        "the request is answered",
      );
      socket.destroy();
      return { status: Number(status), body: JSON.parse(json!) };
    },
  };
}
