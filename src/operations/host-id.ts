import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { StartupError } from "./startup-error.js";

/**
 * A host id names one running host among several on one database: in leases, in forwarded calls,
 * in commit notices and in `/metrics`. It travels in NOTIFY payloads and metric labels, so it is
 * kept to a short, plain alphabet.
 */
const HOST_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/**
 * `--host-id` as given, or a new one: this machine's name and a random suffix (unique per start).
 * `named` is how a refusal names it: the flag, or `createSessionmux`'s option.
 */
export function hostIdOf(given: string | undefined, named: "--host-id" | "hostId" = "--host-id"): string {
  if (given !== undefined) {
    if (!HOST_ID.test(given)) {
      throw new StartupError(
        "host_id_invalid",
        `${named} ${JSON.stringify(given)}: use 1–64 letters, digits, '.', '_' or '-'`,
      );
    }
    return given;
  }
  const machine = hostname()
    .replace(/[^A-Za-z0-9._-]/g, "-")
    .replace(/^[^A-Za-z0-9]+/, "")
    .slice(0, 48);
  const suffix = randomBytes(4).toString("hex");
  return machine.length > 0 ? `${machine}-${suffix}` : `host-${suffix}`;
}
