import type { HostFrame } from "../../protocol/index.js";
import { RemoteError } from "./remote-errors.js";

/** The receiving end of one unary call. */
export interface PendingCall {
  resolve(value: unknown): void;
  reject(error: Error): void;
}

/** The receiving end of one logical stream. */
export interface StreamSink {
  item(value: unknown): void;
  end(): void;
  error(error: Error): void;
}

/**
 * Calls and streams in flight on one physical socket, keyed by frame id (§3). Routes the host's
 * `result`/`item`/`end`/`error` frames; frames for ids it does not know (a stream the caller
 * already closed) are dropped.
 */
export class RequestRegistry {
  readonly #calls = new Map<number, PendingCall>();
  readonly #streams = new Map<number, StreamSink>();
  #failed: Error | undefined;

  /** Registers a call; if the socket already died the call fails at once. */
  addCall(id: number, pending: PendingCall): void {
    if (this.#failed) pending.reject(this.#failed);
    else this.#calls.set(id, pending);
  }

  /** Registers a stream; if the socket already died the stream fails at once. */
  addStream(id: number, sink: StreamSink): void {
    if (this.#failed) sink.error(this.#failed);
    else this.#streams.set(id, sink);
  }

  /** Fails the one call or stream with this id (an answer that could not be read); returns whether one was. */
  fail(id: number, error: Error): boolean {
    const call = this.#calls.get(id);
    if (call) {
      this.#calls.delete(id);
      call.reject(error);
      return true;
    }
    const sink = this.#streams.get(id);
    if (!sink) return false;
    this.#streams.delete(id);
    sink.error(error);
    return true;
  }

  /** Forgets a call the caller gave up on; returns whether it was still in flight. */
  removeCall(id: number): boolean {
    return this.#calls.delete(id);
  }

  /** Forgets a stream the caller no longer wants; returns whether it was still in flight. */
  removeStream(id: number): boolean {
    return this.#streams.delete(id);
  }

  /** Routes one id-carrying host frame; returns whether an entry took it. */
  deliver(frame: HostFrame): boolean {
    switch (frame.type) {
      case "result": {
        const call = this.#calls.get(frame.id);
        if (!call) return false;
        this.#calls.delete(frame.id);
        call.resolve(frame.value);
        return true;
      }
      case "item": {
        const sink = this.#streams.get(frame.id);
        if (!sink) return false;
        sink.item(frame.value);
        return true;
      }
      case "end": {
        const sink = this.#streams.get(frame.id);
        if (!sink) return false;
        this.#streams.delete(frame.id);
        sink.end();
        return true;
      }
      case "error":
        return frame.id !== undefined && this.fail(frame.id, RemoteError.fromWireError(frame.error));
      default:
        return false;
    }
  }

  /** Fails everything in flight with `error` (the socket died); later registrations fail too. */
  failAll(error: Error): void {
    this.#failed ??= error;
    const calls = [...this.#calls.values()];
    const streams = [...this.#streams.values()];
    this.#calls.clear();
    this.#streams.clear();
    for (const call of calls) call.reject(error);
    for (const sink of streams) sink.error(error);
  }
}
