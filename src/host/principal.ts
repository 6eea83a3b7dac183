/** Who is calling. An admin sees every session; others see only the sessions they created. */
export interface Principal {
  readonly name: string;
  readonly admin: boolean;
}

export const ADMIN: Principal = Object.freeze({ name: "admin", admin: true });

export function canSee(principal: Principal, owner: string): boolean {
  return principal.admin || principal.name === owner;
}
