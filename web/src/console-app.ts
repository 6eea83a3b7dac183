import type { SessionRow } from "../../protocol/index.js";
import type { ConnectionState, ControlMirror } from "../../src/client/index.js";
import { ComposerDrafts } from "./composer-drafts.js";
import { type ActionContext, answerCard, bindKeyboard, queueAction } from "./console-actions.js";
import type { ConsoleElements } from "./console-elements.js";
import type { ConsoleLink } from "./console-link.js";
import { DismissalActions } from "./dismissal-actions.js";
import { markStale } from "./last-known.js";
import { connectionLabel, renderJobs, renderQueue } from "./live-panel-view.js";
import { promptTooLong } from "./prompt-size.js";
import { QueuedPromptEdit } from "./queued-prompt-edit.js";
import { RetryWait } from "./retry-wait.js";
import { activityLabel, activityOf, rowWithActivity } from "./session-activity.js";
import type { SessionCache } from "./session-cache.js";
import { SessionListModel } from "./session-list-model.js";
import { orderSessions } from "./session-list-order.js";
import {
  type ListView,
  listClock,
  renderSearchHits,
  renderSessionList,
  rowTitle,
  type SearchHit,
} from "./session-list-view.js";
import { SessionModel } from "./session-model.js";
import { steerBlocked } from "./steer-offer.js";
import { askText } from "./text-dialog.js";
import { TranscriptView } from "./transcript-view.js";
import { outcomeUnknown, UnconfirmedPrompts } from "./unconfirmed-prompts.js";

const SEARCH_DELAY_MS = 250;
/** Within this many pixels of the end of the session list, its next older page is read. */
const LIST_NEAR_END_PX = 200;

/** The console: owns the models, draws them once per animation frame, turns clicks into calls. */
export class ConsoleApp {
  private list: SessionListModel;
  private readonly transcriptView: TranscriptView;
  private readonly dismissals: DismissalActions;
  private readonly drafts: ComposerDrafts;
  /** The wait before the list is read again after a failed read, and its timer. */
  private readonly listRetry = new RetryWait();
  private listRetryTimer: ReturnType<typeof setTimeout> | undefined;
  /** Sends whose answer never came, by session: their text, if sent again, goes with the same id. */
  private readonly unconfirmed = new UnconfirmedPrompts();
  /** What the card, queue and keyboard handlers may use. */
  private readonly actions: ActionContext;
  private session: SessionModel | undefined;
  private mirror: ControlMirror | undefined;
  private connection: ConnectionState | undefined;
  /** The state the indicator shows: taken in the same frame that enables or disables the actions. */
  private shownConnection: ConnectionState | undefined;
  /**
   * Interactions this tab sent an answer for, less those the host refused: replaced, never
   * changed, so the transcript sees a change by identity.
   */
  private answered: ReadonlySet<string> = new Set();
  private searchHits: SearchHit[] | undefined;
  /** Said instead of "No matches" when the host gave the query no hits to show. */
  private searchNote: string | undefined;
  /** The list, or the sessions this principal dismissed (they keep running). */
  private listView: ListView = "list";
  private searchSeq = 0;
  private frame = 0;
  /**
   * Where the keyboard goes once the next frame is drawn: an element the draw shows (the composer
   * of a new session) cannot take the focus while it is still hidden.
   */
  private focusAfterDraw: HTMLElement | undefined;
  /** The list row to take the keyboard once the list is drawn with it. */
  private focusRowAfterDraw: string | undefined;
  /** The `listClock` tick the list was last drawn at. */
  private drawnListClock = 0;
  /** What each region was last drawn from; a region is redrawn only when its input changed. */
  private readonly drawn = new Map<string, unknown>();

  constructor(
    private readonly el: ConsoleElements,
    private readonly link: ConsoleLink,
    private cache: SessionCache,
    private readonly onSelect: (sessionId: string | undefined) => void,
  ) {
    this.list = new SessionListModel(link, cache, () => this.schedule());
    this.dismissals = new DismissalActions({
      link,
      list: () => this.list,
      online: () => this.online,
      run: (what, work) => this.run(what, work),
      show: (view, sessionId) => {
        this.listView = view;
        if (sessionId !== undefined) this.select(sessionId);
        this.schedule();
      },
    });
    this.actions = {
      el,
      link,
      session: () => this.session,
      queuedEdit: new QueuedPromptEdit({
        dialog: el.textDialog,
        queued: (sessionId, itemId) =>
          this.mirror?.queues[sessionId]?.find((q) => q.itemId === itemId)?.text ?? "",
        save: (sessionId, itemId, text) => this.run("Edit", () => link.editQueue(sessionId, itemId, text)),
        giveBack: (sessionId, text) => {
          this.drafts.giveBack(sessionId, text, this.session?.sessionId);
          if (sessionId === this.session?.sessionId) el.composerInput.focus();
        },
        tell: (text) => this.toast(text),
      }),
      run: (what, work) => this.run(what, work),
      answer: (interactionId, response) => this.answer(interactionId, response),
      search: (query) => this.search(query),
    };
    this.transcriptView = new TranscriptView(el.transcript, el.jumpLatest, (pressed) => {
      const s = this.session;
      if (!s) return;
      this.run("Loading earlier messages", async () => {
        const turnId = await s.loadOlder();
        // asked for with the button: the prompt of the turn the view began inside comes into sight
        if (pressed && turnId !== undefined && s === this.session) this.transcriptView.reveal(turnId);
      });
    });
    this.drafts = new ComposerDrafts(el.composerInput);
  }

  start(initialSession: string | undefined): void {
    this.link.onConnection((state) => this.connected(state));
    this.link.onListChange((change) => {
      if (change.kind === "agent-error") {
        this.toast(`Agent error: ${change.message}`);
        return;
      }
      if (change.kind === "removed") this.removed(change.sessionId);
      this.list.apply(change);
    });
    this.link.onMirror(
      (mirror) => {
        this.mirror = mirror;
        if (!mirror.stale) this.actions.queuedEdit.queuesChanged(mirror.queues);
        for (const row of Object.values(mirror.projections)) this.list.project(row);
        if (mirror.generationChanged) this.el.restartNotice.hidden = false;
        this.schedule();
      },
      (error) => this.toast(`Live state unavailable: ${String(error)}`),
    );
    this.bindEvents();
    if (initialSession) this.select(initialSession);
    this.schedule();
    setInterval(() => {
      if (this.shownConnection?.name === "backoff") this.drawConnection();
      // the rows' ages ("now", "5m") move on while nothing else changes
      if (listClock() !== this.drawnListClock) this.schedule();
    }, 250);
    addEventListener("pagehide", () => this.session?.flush());
  }

  /**
   * Connects with a new token without a reload (the host mints a new one each time it starts).
   * The shown session is opened again on the new connection, from its cached prefix.
   */
  useToken(token: string, cache: SessionCache): void {
    const shown = this.session?.sessionId;
    this.session?.dispose();
    this.session = undefined;
    // nothing keeps the old client's live state current: last known until the new one's baseline
    if (this.mirror) this.mirror = { ...this.mirror, stale: true };
    this.cache = cache;
    this.list.dispose();
    this.list = new SessionListModel(this.link, cache, () => this.schedule());
    this.link.useToken(token);
    this.select(shown);
  }

  /** Calls can reach the host: the socket is open. Otherwise actions are disabled and live state is stale. */
  private get online(): boolean {
    return this.connection?.name === "open";
  }

  select(sessionId: string | undefined): void {
    if (sessionId === this.session?.sessionId) return;
    this.drafts.switchTo(this.session?.sessionId, sessionId);
    this.session?.dispose();
    this.transcriptView.clear();
    this.session = sessionId
      ? new SessionModel(sessionId, this.link, this.cache, () => this.schedule())
      : undefined;
    this.session?.start();
    this.el.app.classList.remove("sidebar-open");
    this.onSelect(sessionId);
    this.drawn.clear();
    this.schedule();
  }

  /**
   * A session was deleted, here or elsewhere: nothing of it stays on the page. One deleted by
   * another tab or client while it was shown here is said so, rather than just vanishing.
   */
  private removed(sessionId: string): void {
    if (sessionId === this.session?.sessionId) {
      const title = rowTitle(this.list.row(sessionId) ?? { title: this.session.transcript.title, sessionId });
      this.select(undefined);
      this.toast(`“${title}” was deleted by another tab or client.`);
    }
    this.drafts.drop(sessionId);
    if (this.searchHits?.some((hit) => hit.sessionId === sessionId)) {
      this.searchHits = this.searchHits.filter((hit) => hit.sessionId !== sessionId);
      this.schedule();
    }
  }

  private connected(state: ConnectionState): void {
    this.connection = state;
    if (state.name === "open") {
      // Notifications carry no sequence: anything missed while away is recovered by a fresh list.
      this.el.authNotice.hidden = true;
      this.refreshList();
    }
    if (state.name === "unauthorized") {
      this.el.authMessage.textContent =
        state.status === 401
          ? "The host refused this console's access token (HTTP 401): it mints a new one each time it starts."
          : "The host refused this page's origin (HTTP 403).";
      this.el.authNotice.hidden = false;
      this.el.tokenInput.focus();
    }
    if (state.name === "rejected") this.toast(`The host refused the connection (HTTP ${state.status}).`);
    // the console comes from its host: one of another version is a host upgraded since the page loaded
    if (state.name === "incompatible") {
      this.toast(`The host now speaks protocol ${state.protocol}, this page protocol 1: reload the page.`);
    }
    this.schedule();
  }

  /**
   * Reads the list afresh. A read the host failed (its database away a moment) is made again
   * after a `RetryWait` while the socket stays up: the list would otherwise keep what the tab
   * knew before the reconnect, sessions deleted meanwhile included, until the next one.
   */
  private refreshList(): void {
    const list = this.list;
    clearTimeout(this.listRetryTimer);
    list.refresh().then(
      () => this.listRetry.reset(),
      (e: unknown) => {
        this.toast(`Could not load sessions: ${String(e)}`);
        this.listRetryTimer = setTimeout(() => {
          // offline, the next open reads it; a new token's list reads its own
          if (list === this.list && this.online) this.refreshList();
        }, this.listRetry.next());
      },
    );
  }

  private drawConnection(): void {
    const state = this.shownConnection;
    if (!state) return;
    this.el.connection.dataset.state = state.name;
    this.el.connectionLabel.textContent = connectionLabel(state, Date.now(), navigator.onLine);
  }

  private schedule(): void {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  }

  private draw(): void {
    // The indicator and every action follow one state in one frame: the page never shows an
    // offline indicator beside buttons that still look usable, nor the reverse.
    this.shownConnection = this.connection;
    this.drawConnection();
    const s = this.session;
    const selected = s?.sessionId;
    const online = this.online;
    // Offline, or before the control stream's baseline, what the agents do is only last known.
    const liveStale = !online || this.mirror === undefined || this.mirror.stale;
    // The header and the rows take the agent's activity from one place, so they cannot disagree.
    const activity = activityOf(this.mirror);
    const view = this.listView;
    const shown = view === "list" ? this.list.rows : this.list.dismissed;
    const rows = [...shown.values()].map((row) => rowWithActivity(row, activity(row.sessionId, row)));
    this.drawnListClock = listClock();
    const list = this.list;
    const paging = {
      end: list.endOf(view),
      more: list.hasOlder(view),
      loading: list.isLoadingOlder(view),
      online,
      pinned: { limit: list.pinnedLimit, more: list.morePinned, loading: list.isLoadingPinned },
    };
    this.region(
      "list",
      JSON.stringify([rows, paging]) + selected + view + liveStale + this.drawnListClock,
      () => renderSessionList(this.el.sessionList, rows, selected, view, liveStale, paging),
    );
    this.el.showDismissed.setAttribute("aria-pressed", String(view === "dismissed"));
    this.region("hits", this.searchHits, () =>
      renderSearchHits(
        this.el.searchHits,
        this.searchHits,
        (id) => rowTitle(this.list.row(id) ?? { title: "", sessionId: id }),
        this.searchNote,
      ),
    );
    for (const control of [this.el.newSession, this.el.search]) control.disabled = !online;
    this.el.emptyState.hidden = s !== undefined;
    this.el.session.hidden = s === undefined;
    this.focusAfterDraw?.focus();
    this.focusAfterDraw = undefined;
    if (this.focusRowAfterDraw !== undefined) {
      const id = this.focusRowAfterDraw;
      this.focusRowAfterDraw = undefined;
      this.el.sessionList.querySelector<HTMLElement>(`[data-session-id="${CSS.escape(id)}"]`)?.focus();
    }
    if (!s) return;
    const row = this.list.row(s.sessionId);
    this.el.sessionTitle.textContent =
      s.mode === "gone"
        ? "Session not available"
        : rowTitle({ title: s.transcript.title || row?.title || "", sessionId: s.sessionId });
    const mode = s.mode === "gone" ? "" : s.mode;
    this.el.followState.textContent = mode;
    this.el.followState.dataset.mode = mode;
    const agent = activity(s.sessionId, row);
    this.el.agentStatus.textContent = activityLabel(agent);
    this.el.agentStatus.dataset.state = agent;
    // Offline, the badges show the last known state, marked so it never passes for the current one.
    markStale(this.el.followState, !online);
    // online, a stopped stream says why (the model opens it again by itself); offline, the mark does
    if (online && s.mode === "stopped")
      this.el.followState.title = `Stopped by the host (${s.error}); retrying`;
    markStale(this.el.agentStatus, liveStale);
    this.drawForkOrigin(s.mode === "gone" ? null : s.transcript.forkOf);
    for (const control of [
      this.el.send,
      this.el.cancelTurn,
      this.el.renameSession,
      this.el.forkSession,
      this.el.clearSession,
      this.el.deleteSession,
    ]) {
      control.disabled = !online || s.mode === "gone";
    }
    // the host refuses to clear a session while a turn of it is open (`session_busy`)
    if (s.mode !== "gone" && s.transcript.openTurnId !== null) {
      this.el.clearSession.disabled = true;
      this.el.clearSession.title = "A turn is running: stop it or wait for it to end, then clear";
    } else this.el.clearSession.removeAttribute("title");
    const jobs = this.mirror?.jobs[s.sessionId] ?? [];
    const queue = this.mirror?.queues[s.sessionId] ?? [];
    this.region("jobs", JSON.stringify(jobs) + liveStale, () => renderJobs(this.el.jobs, jobs, liveStale));
    const steerNote = steerBlocked(agent, this.mirror?.agents[s.sessionId]);
    this.region("queue", JSON.stringify(queue) + online + steerNote + liveStale, () =>
      renderQueue(this.el.queue, queue, online, steerNote, liveStale),
    );
    this.el.cancelTurn.hidden = !s.transcript.streaming;
    const gone = s.mode === "gone";
    this.forgetSettledAnswers(s.transcript.pending);
    this.transcriptView.render(
      s.transcript,
      { actionable: online, answered: this.answered },
      gone ? "none" : s.older,
      !gone && s.turnStartMissing,
    );
  }

  /**
   * A fork starts with its source's title, so two rows read alike: the fork's header names its
   * source (by the title the list knows now) and links to it.
   */
  private drawForkOrigin(forkOf: { sessionId: string } | null): void {
    const link = this.el.forkOrigin;
    link.hidden = forkOf === null;
    if (!forkOf) return;
    const source = this.list.row(forkOf.sessionId);
    link.dataset.sessionId = forkOf.sessionId;
    if (!source) {
      link.textContent = "fork of another session";
      return;
    }
    if (link.textContent === `fork of “${rowTitle(source)}”`) return;
    // the title isolated, so one written right to left keeps the words around it in place
    const title = document.createElement("bdi");
    title.textContent = rowTitle(source);
    link.replaceChildren("fork of “", title, "”");
  }

  private region(name: string, input: unknown, draw: () => void): void {
    if (this.drawn.has(name) && this.drawn.get(name) === input) return;
    this.drawn.set(name, input);
    draw();
  }

  private toast(text: string): void {
    this.el.toast.textContent = text;
    this.el.toast.hidden = false;
    clearTimeout(Number(this.el.toast.dataset.timer));
    this.el.toast.dataset.timer = String(setTimeout(() => (this.el.toast.hidden = true), 5000));
  }

  /**
   * Runs a call, reporting a failure instead of throwing into an event handler: the host's code
   * and its message, which says what to do (delete sessions, wait, retry later); a call whose
   * answer never came is said to be not confirmed, never failed.
   */
  private run(what: string, work: () => Promise<unknown>, undo?: () => void): void {
    work().catch((error: unknown) => {
      const { code, message } = error as { code?: string; message?: string };
      // Another tab answered first: the follow stream will show the winner.
      if (code === "interaction_already_resolved" || code === "interaction_not_found") return;
      undo?.();
      // no answer after the call went out: the host may have done it, and the page shows it if so
      if (outcomeUnknown(error)) this.toast(`${what} not confirmed (${code}): the host may have taken it.`);
      else
        this.toast(code ? `${what} failed (${code}): ${message ?? ""}` : `${what} failed: ${String(error)}`);
    });
  }

  /**
   * Answers whose interaction no longer waits, as the live state says (of every session) and as
   * the open session's transcript shows it (`shown`: its card stays closed until the transcript
   * hears the end too), are done with: the set holds only answers still to be settled.
   */
  private forgetSettledAnswers(shown: readonly { interactionId: string }[]): void {
    const waiting = this.mirror?.interactions;
    if (this.answered.size === 0 || !waiting || this.mirror?.stale) return;
    const cards = new Set(shown.map((p) => p.interactionId));
    const kept = [...this.answered].filter((id) => waiting[id] !== undefined || cards.has(id));
    if (kept.length !== this.answered.size) this.answered = new Set(kept);
  }

  /**
   * An answer on its way keeps its card from taking another; one the host refused (a passing
   * fault, a limit) leaves the interaction waiting, so its card is answerable again. An answer
   * that lost to another tab's is not refused here: the follow stream closes the card.
   */
  private answer(interactionId: string, response: Parameters<ConsoleLink["respond"]>[1]): void {
    if (this.answered.has(interactionId)) return;
    this.answered = new Set(this.answered).add(interactionId);
    this.schedule();
    this.run(
      "Answer",
      () => this.link.respond(interactionId, response),
      () => {
        const answered = new Set(this.answered);
        answered.delete(interactionId);
        this.answered = answered;
        this.schedule();
      },
    );
  }

  private send(): void {
    const s = this.session;
    const text = this.el.composerInput.value;
    if (!s || text.trim() === "" || !this.online) return;
    const tooLong = promptTooLong(text, this.link.maxPromptBytes());
    if (tooLong) {
      this.toast(tooLong);
      return;
    }
    this.el.composerInput.value = "";
    s.touch();
    const sessionId = s.sessionId;
    const clientMessageId = this.unconfirmed.idFor(sessionId, text);
    const giveBack = () => this.drafts.giveBack(sessionId, text, this.session?.sessionId);
    this.run(
      "Send",
      async () => {
        try {
          await this.link.prompt(sessionId, text, clientMessageId);
        } catch (error) {
          if (!outcomeUnknown(error)) throw error;
          // not refused: the host may have it, so "failed" would be untrue, and a second send of
          // the text given back carries the same id, which the host answers without running it again
          this.unconfirmed.keep(sessionId, text, clientMessageId);
          giveBack();
          const code = (error as { code?: string }).code;
          this.toast(
            `Send not confirmed (${code}): the host may have the prompt; sending the same text again will not repeat it.`,
          );
        }
      },
      giveBack,
    );
  }

  /**
   * Adds the next older page to the list. The keyboard that pressed the button goes on to the
   * first row the page brought (the button may be gone: there is nothing older).
   */
  private loadOlder(keyboard: boolean): void {
    const list = this.list;
    const view = this.listView;
    // the list may know rows past its end already (control projections): only the shown ones count
    const shown = () =>
      view === "list"
        ? orderSessions(list.rows.values(), list.end, list.pinnedLimit).recent
        : orderSessions(list.dismissed.values(), list.endOf(view), 0).recent;
    this.readMore("Loading older sessions", shown, () => list.loadOlder(view), keyboard);
  }

  /**
   * Pins more of the sessions waiting on you. The keyboard that pressed the button goes on to the
   * first session it pinned (the button may be gone: none waits past them).
   */
  private loadMorePinned(keyboard: boolean): void {
    const list = this.list;
    const pinned = () => orderSessions(list.rows.values(), list.end, list.pinnedLimit).pinned;
    this.readMore("Loading more sessions waiting on you", pinned, () => list.loadMorePinned(), keyboard);
  }

  /**
   * Runs `read`, which adds rows to a group of the list (`rows`); a press by `keyboard` then takes
   * the focus to the first row the read brought, unless the list was replaced meanwhile.
   */
  private readMore(
    what: string,
    rows: () => SessionRow[],
    read: () => Promise<void>,
    keyboard: boolean,
  ): void {
    const list = this.list;
    const known = new Set(rows().map((row) => row.sessionId));
    this.run(what, async () => {
      await read();
      if (!keyboard || list !== this.list) return;
      this.focusRowAfterDraw = rows().find((row) => !known.has(row.sessionId))?.sessionId;
      this.schedule();
    });
  }

  /**
   * Scrolled near the end of a list that has older pages: read the next one, as the button
   * would. Scroll events keep coming while a page is read; only the first reads it. Not while
   * the button has the focus: the keyboard scrolled it into view, and its press reads the page
   * and takes the keyboard on to the rows it brings.
   */
  private loadOlderNearEnd(): void {
    const el = this.el.sessionList;
    const view = this.listView;
    if (el.scrollHeight - el.scrollTop - el.clientHeight > LIST_NEAR_END_PX) return;
    if (document.activeElement?.closest('[data-action="older"]')) return;
    if (!this.online || !this.list.hasOlder(view) || this.list.isLoadingOlder(view)) return;
    this.loadOlder(false);
  }

  private search(query: string): void {
    const mine = ++this.searchSeq;
    if (query.trim() === "") {
      this.searchHits = undefined;
      this.searchNote = undefined;
      this.schedule();
      return;
    }
    setTimeout(() => {
      if (mine !== this.searchSeq) return;
      this.run("Search", async () => {
        try {
          const { hits } = await this.link.search(query.trim());
          if (mine !== this.searchSeq) return; // the query changed while this one was in flight
          this.searchHits = hits;
          this.searchNote = undefined;
        } catch (error) {
          if (mine !== this.searchSeq) return;
          // the hits shown are another query's: they go, whatever the answer to this one was
          this.searchHits = [];
          const tooBroad = (error as { code?: string }).code === "search_too_broad";
          this.searchNote = tooBroad ? "Too many messages match: add a word" : "Search failed";
          if (!tooBroad) throw error;
        } finally {
          this.schedule();
        }
      });
    }, SEARCH_DELAY_MS);
  }

  private bindEvents(): void {
    const el = this.el;
    const pick = (event: Event) => {
      const target = event.target as HTMLElement;
      if (target.closest('[data-action="older"]')) {
        this.loadOlder(document.activeElement === target.closest("button"));
        return;
      }
      if (target.closest('[data-action="more-pinned"]')) {
        this.loadMorePinned(document.activeElement === target.closest("button"));
        return;
      }
      const item = target.closest<HTMLElement>("[data-session-id]");
      const action = target.closest<HTMLElement>("[data-action]")?.dataset.action;
      const sessionId = item?.dataset.sessionId;
      if (sessionId && !this.dismissals.open(sessionId, action)) this.select(sessionId);
    };
    el.sessionList.addEventListener("click", pick);
    el.sessionList.addEventListener("scroll", () => this.loadOlderNearEnd(), { passive: true });
    el.searchHits.addEventListener("click", pick);
    // Enter on a row's own button clicks it already
    el.sessionList.addEventListener(
      "keydown",
      (e) => e.key === "Enter" && !(e.target instanceof HTMLButtonElement) && pick(e),
    );
    el.showDismissed.addEventListener("click", () => {
      this.listView = this.listView === "list" ? "dismissed" : "list";
      this.schedule();
    });
    el.search.addEventListener("input", () => this.search(el.search.value));
    el.toggleSidebar.addEventListener("click", () => el.app.classList.toggle("sidebar-open"));
    el.dismissNotice.addEventListener("click", () => (el.restartNotice.hidden = true));
    el.newSession.addEventListener("click", () =>
      this.run("Create", async () => {
        const { header } = await this.link.create();
        this.select(header.sessionId);
        this.focusAfterDraw = el.composerInput;
      }),
    );
    el.composer.addEventListener("submit", (e) => {
      e.preventDefault();
      this.send();
    });
    el.composerInput.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.send();
      }
    });
    el.cancelTurn.addEventListener("click", () => {
      const s = this.session;
      if (s) this.run("Stop", () => this.link.cancel(s.sessionId));
    });
    el.renameSession.addEventListener("click", async () => {
      const s = this.session;
      if (!s) return;
      const title = await askText(el.textDialog, "Rename session", s.transcript.title);
      if (title === null) return;
      s.touch();
      this.run("Rename", () => this.link.rename(s.sessionId, title));
    });
    el.forkSession.addEventListener("click", () => {
      const s = this.session;
      if (s) this.run("Fork", async () => this.select((await this.link.fork(s.sessionId)).header.sessionId));
    });
    el.forkOrigin.addEventListener("click", () => {
      const source = el.forkOrigin.dataset.sessionId;
      if (source) this.select(source);
    });
    el.clearSession.addEventListener("click", () => {
      const s = this.session;
      if (!s || !confirm("Clear this session's history? The session is kept.")) return;
      s.cleared();
      this.run("Clear", () => this.link.clear(s.sessionId, s.epoch));
    });
    el.deleteSession.addEventListener("click", () => {
      const s = this.session;
      if (!s || !confirm("Delete this session for good?")) return;
      s.deleted();
      this.select(undefined);
      this.removed(s.sessionId);
      this.list.apply({ kind: "removed", sessionId: s.sessionId });
      // the button that had the keyboard is hidden with the session: it goes to a start of its own
      this.focusAfterDraw = el.newSession;
      const list = this.list;
      // shown gone at once; a delete that failed may have left it on the host, which a fresh list says
      const undo = () => {
        if (list !== this.list) return;
        list.deleteFailed(s.sessionId);
        this.refreshList();
      };
      this.run("Delete", () => this.link.remove(s.sessionId), undo);
    });
    el.transcript.addEventListener("click", (e) => answerCard(this.actions, e.target as HTMLElement));
    bindKeyboard(this.actions);
    el.queue.addEventListener("click", (e) => queueAction(this.actions, e.target as HTMLElement));
  }
}
