import type { ResultOf } from "../../protocol/index.js";
import { ConsoleLink } from "../../web/src/console-link.js";
import { gate } from "../support/gate.js";

/** A link whose reads of older list pages are answered by the host at once but handed on only when the test opens `held`. */
export class HeldLink extends ConsoleLink {
  held = gate();
  /** Older pages the host has answered, held or not. */
  olderAnswered = 0;

  override async list(
    limit: number,
    filter: { parked?: true; dismissed?: true; before?: string } = {},
  ): Promise<ResultOf<"session.list">> {
    const answer = await super.list(limit, filter);
    if (filter.before !== undefined) {
      this.olderAnswered += 1;
      await this.held.promise;
    }
    return answer;
  }
}
