/**
 * This host cannot run the session's agent: another live host holds its lease (`holder`), or this
 * host lost it while the call ran (`holder` null). Never reaches a client: the call router sends
 * the call to the owner instead, or resolves the owner again.
 */
export class NotOwner extends Error {
  constructor(
    readonly sessionId: string,
    readonly holder: string | null,
  ) {
    super(`session ${sessionId} is owned by ${holder ?? "another host"}`);
    this.name = "NotOwner";
  }
}
