import { Observable, type Subscription } from "rxjs";
import { SessionmuxError } from "../../protocol/errors.js";
import type { DownloadItem, ResultOf } from "../../protocol/index.js";
import { DEFAULT_BACKOFF } from "./backoff.js";
import type { SessionmuxClient } from "./client.js";
import { MAX_HOST_MESSAGE_BYTES } from "./host-frame-reader.js";
import { longTimeout } from "./long-timeout.js";
import { RemoteError, RemoteStreamCarrierError } from "./remote-errors.js";
import { superviseStream } from "./stream-supervisor.js";

/** Options of `SessionmuxClient.download`. */
export interface DownloadOptions {
  /**
   * Fail with `timeout` when nothing of the attachment arrives for this long (counting the waits
   * for a socket): a slow link that keeps delivering is never cut. @default the client's `callTimeoutMs`
   */
  idleTimeoutMs?: number;
  /** Settles the download with `aborted` when it fires. */
  signal?: AbortSignal;
  /** Called after each piece with the bytes received so far and the attachment's size. */
  onProgress?: (received: number, size: number) => void;
  /**
   * The largest attachment read: a host naming a larger size fails the download with
   * `payload_too_large` before a byte is kept (a host without `session.download`, whose answer
   * is one message, once it is read). @default 64 MiB (a principal's upload quota)
   */
  maxBytes?: number;
}

/** The default of `DownloadOptions.maxBytes`. */
export const DEFAULT_MAX_DOWNLOAD_BYTES = 64 * 1024 * 1024;

export type Attachment = ResultOf<"session.attachment">;
type Head = Extract<DownloadItem, { kind: "head" }>;

/**
 * Reads an attachment with `session.download` (§5): its pieces arrive as messages of their own,
 * so a slow link keeps the socket heard and other streams flowing, and after a lost socket the
 * stream is opened again at the byte reached. A host that does not know `session.download`
 * answers `unknown_method`; the attachment is then read with `fallback` (`session.attachment`).
 */
export function downloadAttachment(
  client: SessionmuxClient,
  params: { sessionId: string; attachmentId: string },
  options: DownloadOptions & { idleTimeoutMs: number },
  fallback: () => Promise<Attachment>,
): Promise<Attachment> {
  const max = options.maxBytes ?? DEFAULT_MAX_DOWNLOAD_BYTES;
  const tooLarge = (size: number) =>
    new SessionmuxError("payload_too_large", `session.download: ${size} bytes, past maxBytes`, {
      data: { method: "session.download", maxBytes: max, size },
    });
  return new Promise<Attachment>((resolve, reject) => {
    let head: Head | undefined;
    let body = new Uint8Array(0);
    let received = 0;
    let done = false;
    let clearIdle = (): void => {};
    let subscription: Subscription | undefined;
    const finish = (outcome: () => void): void => {
      if (done) return;
      done = true;
      clearIdle();
      options.signal?.removeEventListener("abort", onAbort);
      subscription?.unsubscribe();
      outcome();
    };
    const fail = (error: unknown) => finish(() => reject(error));
    const onAbort = () =>
      fail(
        new SessionmuxError("aborted", "the download was aborted by the caller", {
          cause: options.signal?.reason,
        }),
      );
    const waitForBytes = (): void => {
      clearIdle();
      clearIdle = longTimeout(
        () =>
          fail(
            new SessionmuxError(
              "timeout",
              `session.download: nothing in ${options.idleTimeoutMs} ms (${received} of ${head?.size ?? "?"} bytes read)`,
              { data: { method: "session.download", timeoutMs: options.idleTimeoutMs, received } },
            ),
          ),
        options.idleTimeoutMs,
      );
    };

    const download = new Observable<never>((subscriber) =>
      superviseStream<DownloadItem, never>(
        subscriber,
        () => client.open("session.download", { ...params, offset: received }),
        {
          next: (item, control) => {
            waitForBytes();
            if (item.kind === "head") {
              if (!head) {
                // A size that is no byte count would throw out of this callback, unhandled; a valid
                // one is allocated up front only up to one message, so that one small frame
                // cannot make the client hold whatever size it names.
                if (!Number.isSafeInteger(item.size) || item.size < 0) {
                  return fail(
                    new SessionmuxError(
                      "invalid_host_frame",
                      `the host sent session.download a size of ${item.size}; the client cannot read it`,
                      { data: { method: "session.download" } },
                    ),
                  );
                }
                // the body grows to the size named as bytes arrive: a size past the bound is refused (every
                // size when the bound is NaN: a bad option never lifts it)
                if (!(item.size <= max)) return fail(tooLarge(item.size));
                head = item;
                body = new Uint8Array(Math.min(item.size, MAX_HOST_MESSAGE_BYTES));
              } else if (item.size !== head.size) {
                fail(
                  new SessionmuxError(
                    "attachment_not_found",
                    `attachment ${params.attachmentId} changed while read`,
                  ),
                );
              }
              return;
            }
            // The host sends every byte once, in order; anything else is repaired by reopening.
            if (!head || item.offset !== received || received + item.bytes.byteLength > head.size) {
              return control.reopen();
            }
            if (received + item.bytes.byteLength > body.length) {
              // past what was allocated up front, the body grows with what arrives
              const grown = new Uint8Array(
                Math.min(head.size, Math.max(2 * body.length, received + item.bytes.byteLength)),
              );
              grown.set(body.subarray(0, received));
              body = grown;
            }
            body.set(item.bytes, received);
            received += item.bytes.byteLength;
            control.progressed();
            options.onProgress?.(received, head.size);
          },
        },
        { policy: DEFAULT_BACKOFF, state$: client.state$, generation: () => client.hello?.generation },
      ),
    );

    if (options.signal?.aborted) return onAbort();
    options.signal?.addEventListener("abort", onAbort, { once: true });
    waitForBytes();
    subscription = download.subscribe({
      error: (error: unknown) => {
        if (error instanceof RemoteError && error.code === "unknown_method" && !head) {
          // a host from before `session.download`: the whole answer in one message
          // its answer is one message, kept whole: past the bound it is refused all the same
          finish(() =>
            fallback()
              .then((a) => {
                // an answer that is no attachment is the caller's as it came, as before the bound
                const size = a?.bytes?.byteLength ?? 0;
                if (!(size <= max)) throw tooLarge(size);
                return a;
              })
              .then(resolve, reject),
          );
        } else fail(error);
      },
      complete: () => {
        if (head && received === head.size) {
          const { name, type, size } = head;
          finish(() => resolve({ name, type, size, bytes: body }));
        } else if (client.state.name === "closed") fail(new RemoteStreamCarrierError("client_closed"));
        else {
          fail(
            new SessionmuxError(
              "invalid_host_frame",
              `the host ended session.download at byte ${received} of ${head?.size ?? "?"}`,
              { data: { method: "session.download", received } },
            ),
          );
        }
      },
    });
  });
}
