import { SessionmuxError } from "../../protocol/index.js";
import type { HostContext } from "./host-context.js";
import type { Principal } from "./principal.js";

/**
 * Refuses a write that would add to what a principal stores (its sessions' event data and its
 * attachments) once that reaches its quota. Checked before the write, not inside its
 * transaction: writes admitted earlier (a running turn, queued prompts) still complete, so the
 * quota can be passed by what they add. The admin is exempt, as from the other per-principal limits.
 */
export async function assertStorageRoom(ctx: HostContext, principal: Principal): Promise<void> {
  // the admin is not bound: no read
  if (principal.admin) return;
  const { storedBytes, maxBytes } = await storageUsage(ctx, principal);
  if (maxBytes === null || storedBytes < maxBytes) return;
  throw new SessionmuxError(
    "storage_quota_exceeded",
    `${principal.name} stores ${storedBytes} bytes (event data and attachments), the most allowed is ${maxBytes}; delete or clear sessions to add more`,
    { data: { maxBytes, storedBytes } },
  );
}

/** What `principal` stores and its quota (null: the admin, who is not bound). */
export async function storageUsage(
  ctx: HostContext,
  principal: Principal,
): Promise<{ storedBytes: number; maxBytes: number | null }> {
  const storedBytes = await ctx.store.ownerStoredBytes(principal.name);
  return { storedBytes, maxBytes: principal.admin ? null : ctx.limits.storedBytesPerPrincipal };
}
