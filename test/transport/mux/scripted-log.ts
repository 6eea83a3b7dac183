import { encodeFrame } from "../../../protocol/codec.js";
import type { SessionEvent } from "../../../protocol/index.js";
import type { HostApi } from "../../../src/host/host-api.js";
import type { SessionReadHandle } from "../../../src/host/session-read-handle.js";
import type { CommitListener, CommitNotice, EncodedReadOutcome } from "../../../src/store/session-store.js";

type OkRead = Extract<EncodedReadOutcome, { status: "ok" }>;

export interface PendingRead {
  readonly afterSeq: number;
  readonly limit: number;
  readonly perArray: number;
  /** Answers the read from the log as it is now (a read whose snapshot is taken late). */
  release(): void;
  fail(error: unknown): void;
}

/**
 * One session's log behind `HostApi.openRead`, with every asynchronous step in the test's hands:
 * log reads wait until the test releases them (their snapshot is the log at release), and commit
 * notices are delivered only when the test says, in the order it says. So a test can put a commit
 * inside a read, deliver a notice late or twice, skip one, or clear the log between two reads:
 * the interleavings an asynchronous store (PostgreSQL) produces, one at a time.
 */
export class ScriptedLog {
  epoch = "E1";
  events: SessionEvent[] = [];
  readonly listeners = new Set<CommitListener>();
  readonly pending: PendingRead[] = [];
  readonly reads: { afterSeq: number; limit: number; perArray: number }[] = [];
  /** Reads answer on their own, at once, while true. */
  autoRelease = true;
  /** Size of each event's text: large ones shrink the next read. */
  textBytes = 1;

  constructor(readonly sessionId = "s1") {}

  get headSeq(): number {
    return this.events.at(-1)?.seq ?? 0;
  }

  /** Commits `count` events to the log and returns them; nobody is told until `notify`. */
  commit(count: number): SessionEvent[] {
    const batch: SessionEvent[] = [];
    for (let i = 0; i < count; i++) {
      const seq = this.headSeq + 1;
      const event = {
        seq,
        at: seq,
        type: "assistant/delta",
        data: { turnId: "t", text: "x".repeat(this.textBytes) },
      } as SessionEvent;
      this.events.push(event);
      batch.push(event);
    }
    return batch;
  }

  /** Commits and tells every listener at once (a store whose notices are never late). */
  append(count: number): SessionEvent[] {
    const batch = this.commit(count);
    this.notify({ kind: "append", epoch: this.epoch, events: batch });
    return batch;
  }

  notify(notice: CommitNotice): void {
    for (const listener of [...this.listeners]) listener(notice);
  }

  /** A clear: a new epoch with an empty log (the notice is the caller's to send). */
  clear(epoch: string): void {
    this.epoch = epoch;
    this.events = [];
  }

  handle(): SessionReadHandle {
    const log = this;
    return {
      sessionId: this.sessionId,
      header: {
        sessionId: this.sessionId,
        title: "t",
        model: "m",
        createdAt: 0,
        epoch: this.epoch,
        owner: "admin",
      },
      headSeq: this.headSeq,
      subscribe(listener: CommitListener) {
        log.listeners.add(listener);
        return () => log.listeners.delete(listener);
      },
      readAfterEncoded(afterSeq: number, limit: number, perArray: number, envelope?: Uint8Array) {
        log.reads.push({ afterSeq, limit, perArray });
        return new Promise<OkRead>((resolve, reject) => {
          const read: PendingRead = {
            afterSeq,
            limit,
            perArray,
            release: () => resolve(log.#answer(afterSeq, limit, perArray, envelope)),
            fail: reject,
          };
          if (log.autoRelease) read.release();
          else log.pending.push(read);
        });
      },
    } as unknown as SessionReadHandle;
  }

  /** The oldest read still waiting. */
  nextRead(): PendingRead {
    const read = this.pending.shift();
    if (!read) throw new Error("no read is waiting");
    return read;
  }

  host(open: () => Promise<SessionReadHandle> = async () => this.handle()): HostApi {
    return { openRead: open } as unknown as HostApi;
  }

  #answer(afterSeq: number, limit: number, perArray: number, envelope?: Uint8Array): OkRead {
    const slice = this.events.filter((e) => e.seq > afterSeq).slice(0, limit);
    const arrays: Uint8Array[] = [];
    for (let i = 0; i < slice.length; i += perArray) {
      const array = encodeFrame(slice.slice(i, i + perArray));
      arrays.push(Buffer.concat([envelope ?? new Uint8Array(), array]));
    }
    return {
      status: "ok",
      epoch: this.epoch,
      headSeq: this.headSeq,
      count: slice.length,
      lastSeq: slice.at(-1)?.seq ?? afterSeq,
      arrays,
    };
  }
}
