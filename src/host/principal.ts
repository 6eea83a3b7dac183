/** Who is calling. An admin sees every session; others see only the sessions they created. */
export interface Principal {
  readonly name: string;
  readonly admin: boolean;
}

/**
 * What a principal's name may be, however it authenticated (a token entry, the app's own
 * `authenticate`, an in-process client): letters, digits and `._@-`, starting with a letter or
 * digit, at most 64. The name is every session's owner in the store, indexed there (PostgreSQL
 * refuses an index entry of a few KiB), and appears in logs.
 */
export const PRINCIPAL_NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;

export const ADMIN: Principal = Object.freeze({ name: "admin", admin: true });

export function canSee(principal: Principal, owner: string): boolean {
  return principal.admin || principal.name === owner;
}
