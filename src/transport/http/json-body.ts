import { SessionmuxError } from "../../../protocol/index.js";
import { declaredBytes, parseJsonObject, readBody } from "./request-body.js";
import type { RouteContext } from "./route-context.js";

/**
 * 8 MiB — JSON request bodies one principal's requests hold at once while they are read (by
 * principal name, admin too). Without it, a principal sending bodies at once on as many
 * connections made the host hold one whole body per connection: 200 of 1 MiB held 203 MiB.
 */
export const JSON_BODY_BYTES_PER_PRINCIPAL = 8 * 1024 * 1024;

/**
 * A route's JSON object body, counted among its principal's JSON bodies being read from its
 * declared size (a chunked one from each byte read) until it is parsed. One that would take them
 * past `JSON_BODY_BYTES_PER_PRINCIPAL` is read to its end and dropped (a client sends its body
 * whole before it reads the answer, and a connection closed under it loses that), then answered
 * `overloaded`: retryable, once the principal's other requests are answered. A body alone is
 * read whatever its size (within the body limit), so none is refused for good.
 */
export async function readJsonBody(ctx: RouteContext): Promise<Record<string, unknown>> {
  const max = JSON_BODY_BYTES_PER_PRINCIPAL;
  const receipt = ctx.jsonBodies.receive(ctx.principal.name, declaredBytes(ctx.req, ctx.maxBodyBytes));
  try {
    const within = () => receipt.ownerHeld() <= max || receipt.ownerHeld() === receipt.bytes;
    const admitted = within();
    if (!admitted) receipt.release();
    const bytes = await readBody(
      ctx.req,
      ctx.maxBodyBytes,
      admitted &&
        ((size) => {
          receipt.count(size);
          if (within()) return true;
          receipt.release();
          return false;
        }),
    );
    if (receipt.released) {
      throw new SessionmuxError(
        "overloaded",
        `the requests of one principal may hold ${max} bytes of JSON bodies at once; retry once others are answered`,
        { data: { limit: "http_body_bytes_per_principal", max } },
      );
    }
    return parseJsonObject(bytes);
  } finally {
    receipt.release();
  }
}
