import { isStorageFailure } from "./io-errors.js";

/** Since when the store's writes fail on storage, and the database's code for the latest failure. */
export interface WriteFailure {
  since: number;
  code: string | undefined;
}

/**
 * Whether the store's writes are failing on storage (a full disk, storage turned read-only): set
 * by a write transaction that failed so, cleared by the next one that commits. `/readyz` reads it,
 * because a check that only takes the write lock passes on a full disk while every write fails.
 */
export class WriteHealth {
  #failure: WriteFailure | undefined;
  #commits = 0;

  /** `onStorage`: whether an error is a failure of the storage itself (SQLite's by default). */
  constructor(
    private readonly onStorage: (err: unknown) => boolean = isStorageFailure,
    private readonly now: () => number = Date.now,
  ) {}

  /** A write transaction failed; only a failure of the storage itself counts. */
  failed(err: unknown): void {
    if (!this.onStorage(err)) return;
    const code = (err as { code?: unknown }).code;
    this.#failure = {
      since: this.#failure?.since ?? this.now(),
      code: typeof code === "string" ? code : undefined,
    };
  }

  committed(): void {
    this.#failure = undefined;
    this.#commits++;
  }

  /** Write transactions committed so far: unchanged between two readings, none committed in between. */
  commits(): number {
    return this.#commits;
  }

  /** The current run of failures, or undefined while writes commit. */
  failing(): WriteFailure | undefined {
    return this.#failure;
  }
}
