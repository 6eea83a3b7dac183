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
const PRINCIPAL_NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;

export const ADMIN: Principal = Object.freeze({ name: "admin", admin: true });

/** Why a principal may not act: its name breaks `PRINCIPAL_NAME`, or it takes the admin's name. */
export interface PrincipalProblem {
  readonly kind: "malformed_name" | "reserved_name";
  readonly message: string;
}

/**
 * The one check of a principal, whatever named it (a token entry, the app's `authenticate`, an
 * in-process client), so no path lets through a name another refuses. `admin` is reserved for
 * admins: sessions the bare admin token creates are owned by that name, and a plain principal
 * of that name would see them all. Takes `unknown` fields because an app's code may return anything.
 */
export function principalProblem(principal: {
  readonly name?: unknown;
  readonly admin?: unknown;
}): PrincipalProblem | undefined {
  const name = principal?.name;
  if (typeof name !== "string" || !PRINCIPAL_NAME.test(name))
    return {
      kind: "malformed_name",
      message: "a principal name is 1-64 of letters, digits and ._@- starting with a letter or digit",
    };
  if (name === ADMIN.name && principal.admin !== true)
    return {
      kind: "reserved_name",
      message: `the name "${ADMIN.name}" is reserved for admin principals (the bare admin token); pick another name`,
    };
  return undefined;
}

export function canSee(principal: Principal, owner: string): boolean {
  return principal.admin || principal.name === owner;
}
