import { BehaviorSubject, Observable, type Subscription, switchMap } from "rxjs";
import type { ResultOf, SessionRow } from "../../protocol/index.js";
import {
  browserSocketFactory,
  type ConnectionState,
  type ControlMirror,
  controlMirror,
  createClient,
  type FollowUpdate,
  followSession,
  newClientMessageId,
  type SessionmuxClient,
} from "../../src/client/index.js";
import { DEFAULT_PROMPT_BYTES } from "./prompt-size.js";
import { RetryWait } from "./retry-wait.js";

/** The list notifications of §6, as one callback. */
export type ListChange =
  | { kind: "upsert"; row: SessionRow }
  | { kind: "removed"; sessionId: string }
  /** This principal dismissed (`true`) or restored (`false`) it, in this tab or another. */
  | { kind: "dismissed"; sessionId: string; dismissed: boolean; row: SessionRow }
  | { kind: "agent-error"; sessionId: string; message: string };

/**
 * The console's one connection to the host: a single SDK client (one WebSocket per tab), with the
 * calls and streams the console uses given plain callback shapes. A new token replaces the client
 * without a reload (so nothing of the old token's principal lingers on the new connection):
 * connection, control and list listeners move to the new one by themselves; follow streams
 * belong to one client and are reopened by their owner.
 */
export class ConsoleLink {
  private readonly linked: BehaviorSubject<SessionmuxClient>;

  /** `connect` makes a client for a token. */
  constructor(
    private readonly connect: (token: string) => SessionmuxClient,
    token: string,
  ) {
    this.linked = new BehaviorSubject(connect(token));
  }

  /** The browser's link: one native WebSocket to the mux, the token as the `bearer.` subprotocol entry. */
  static open(url: string, token: string): ConsoleLink {
    return new ConsoleLink(
      (t) => createClient({ url, token: t, socketFactory: browserSocketFactory(WebSocket) }),
      token,
    );
  }

  get client(): SessionmuxClient {
    return this.linked.value;
  }

  /** Connects with `token` from now on; the old client is closed and its streams end. */
  useToken(token: string): void {
    const old = this.linked.value;
    this.linked.next(this.connect(token));
    void old.close();
  }

  private perClient<T>(project: (client: SessionmuxClient) => Observable<T>): Observable<T> {
    return this.linked.pipe(switchMap(project));
  }

  onConnection(listener: (state: ConnectionState) => void): () => void {
    const sub = this.perClient((client) => client.state$).subscribe(listener);
    return () => sub.unsubscribe();
  }

  /**
   * The host's live state for as long as the console runs: a mirror that ends with an error (a
   * baseline the database could not read, say) is reported to `onError` and opened again after a
   * `RetryWait`, so a passing fault does not leave the live state stale until a reload.
   */
  onMirror(listener: (mirror: ControlMirror) => void, onError: (error: unknown) => void): () => void {
    const sub = this.perClient((client) =>
      lastingMirror(
        () => controlMirror(client),
        // a host of another protocol version fails every stream until a reload: nothing to retry
        () => client.state.name === "closed" || client.state.name === "incompatible",
        onError,
      ),
    ).subscribe(listener);
    return () => sub.unsubscribe();
  }

  onListChange(listener: (change: ListChange) => void): () => void {
    const sub = this.perClient(
      (client) =>
        new Observable<ListChange>((subscriber) => {
          const offs = [
            client.on("session.added", (v) => subscriber.next({ kind: "upsert", row: v.row })),
            client.on("session.updated", (v) => subscriber.next({ kind: "upsert", row: v.row })),
            client.on("session.removed", (v) => subscriber.next({ kind: "removed", sessionId: v.sessionId })),
            client.on("session.dismissed", (v) => subscriber.next({ kind: "dismissed", ...v })),
            client.on("agent.error", (v) => subscriber.next({ kind: "agent-error", ...v })),
          ];
          return () => {
            for (const off of offs) off();
          };
        }),
    ).subscribe(listener);
    return () => sub.unsubscribe();
  }

  follow(
    sessionId: string,
    from: { afterSeq: number; epoch?: string },
    next: (update: FollowUpdate) => void,
    onError: (error: unknown) => void,
  ): () => void {
    const sub = followSession(this.client, sessionId, from).subscribe({ next, error: onError });
    return () => sub.unsubscribe();
  }

  /** A page of a session's log: after or before a seq, or with neither its newest events (the tail). */
  page(
    sessionId: string,
    from: { afterSeq: number } | { beforeSeq: number } | Record<string, never>,
    limit: number,
  ): Promise<ResultOf<"session.page">> {
    return this.client.call("session.page", { sessionId, ...from, limit });
  }

  /** A page of the list; `before`: the `next` cursor of the page above it. */
  list(
    limit: number,
    filter: { parked?: true; dismissed?: true; before?: string } = {},
  ): Promise<ResultOf<"session.list">> {
    return this.client.call("session.list", { limit, ...filter });
  }

  /** Off this principal's list; the session keeps running. */
  dismiss(sessionId: string): Promise<unknown> {
    return this.client.call("session.dismiss", { sessionId });
  }

  restore(sessionId: string): Promise<unknown> {
    return this.client.call("session.restore", { sessionId });
  }

  search(query: string): Promise<ResultOf<"session.search">> {
    return this.client.call("session.search", { query, limit: 20 });
  }

  create(): Promise<ResultOf<"session.create">> {
    return this.client.call("session.create", {});
  }

  /**
   * The most UTF-8 bytes of text a prompt may carry to the connected host: the longest string its
   * decoder reads, and never more than its frame limit (the SDK refuses a larger frame itself).
   */
  maxPromptBytes(): number {
    const hello = this.client.hello;
    return Math.min(
      hello?.maxStrBytes ?? DEFAULT_PROMPT_BYTES,
      hello?.maxPayloadBytes ?? Number.POSITIVE_INFINITY,
    );
  }

  /** `clientMessageId`: the id of an earlier send of this text whose answer never came. */
  prompt(
    sessionId: string,
    text: string,
    clientMessageId = newClientMessageId(),
  ): Promise<ResultOf<"session.prompt">> {
    return this.client.prompt({ sessionId, text, clientMessageId });
  }

  rename(sessionId: string, title: string): Promise<unknown> {
    return this.client.call("session.rename", { sessionId, title });
  }

  fork(sourceId: string): Promise<ResultOf<"session.fork">> {
    return this.client.call("session.fork", { sourceId });
  }

  clear(sessionId: string, expectedEpoch: string | undefined): Promise<ResultOf<"session.clear">> {
    return this.client.call("session.clear", expectedEpoch ? { sessionId, expectedEpoch } : { sessionId });
  }

  remove(sessionId: string): Promise<unknown> {
    return this.client.call("session.delete", { sessionId });
  }

  cancel(sessionId: string): Promise<unknown> {
    return this.client.call("session.cancel", { sessionId });
  }

  respond(
    interactionId: string,
    response: { outcome: "approve" | "deny" } | { answer: string },
  ): Promise<unknown> {
    return this.client.call("session.respond", { interactionId, response });
  }

  editQueue(sessionId: string, itemId: string, text: string): Promise<unknown> {
    return this.client.call("session.updateQueue", { sessionId, op: { edit: true, itemId, text } });
  }

  removeQueued(sessionId: string, itemId: string): Promise<unknown> {
    return this.client.call("session.updateQueue", { sessionId, op: { remove: true, itemId } });
  }

  steer(sessionId: string, itemId: string): Promise<unknown> {
    return this.client.call("session.updateQueue", { sessionId, op: { steer: true, itemId } });
  }
}

/**
 * The mirror `open` gives, opened again whenever it ends with an error (see `ConsoleLink.onMirror`)
 * or the host ends it while the client is not `closed` (it then ends, and an error is not told);
 * the wait starts over once a mirror is live again.
 */
export function lastingMirror(
  open: () => Observable<ControlMirror>,
  closed: () => boolean,
  onError: (error: unknown) => void,
): Observable<ControlMirror> {
  return new Observable<ControlMirror>((subscriber) => {
    let current: Subscription | undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const wait = new RetryWait();
    const again = (): void => {
      timer = setTimeout(start, wait.next());
    };
    const start = (): void => {
      current = open().subscribe({
        next: (mirror) => {
          if (!mirror.stale) wait.reset();
          subscriber.next(mirror);
        },
        error: (error: unknown) => {
          if (closed()) return subscriber.complete();
          onError(error);
          again();
        },
        // the host ends the stream only when it goes away: open it again unless the client closed
        complete: () => {
          if (closed()) subscriber.complete();
          else again();
        },
      });
    };
    start();
    return () => {
      clearTimeout(timer);
      current?.unsubscribe();
    };
  });
}
