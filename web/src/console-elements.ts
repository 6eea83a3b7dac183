/** The fixed elements of `index.html` the console draws into, looked up once by `data-testid`. */
export interface ConsoleElements {
  app: HTMLElement;
  connection: HTMLElement;
  connectionLabel: HTMLElement;
  restartNotice: HTMLElement;
  dismissNotice: HTMLButtonElement;
  authNotice: HTMLElement;
  authMessage: HTMLElement;
  tokenForm: HTMLFormElement;
  tokenInput: HTMLInputElement;
  send: HTMLButtonElement;
  toast: HTMLElement;
  toggleSidebar: HTMLButtonElement;
  newSession: HTMLButtonElement;
  showDismissed: HTMLButtonElement;
  forgetBrowser: HTMLButtonElement;
  search: HTMLInputElement;
  searchHits: HTMLElement;
  sessionList: HTMLElement;
  emptyState: HTMLElement;
  session: HTMLElement;
  sessionTitle: HTMLElement;
  followState: HTMLElement;
  agentStatus: HTMLElement;
  forkOrigin: HTMLButtonElement;
  renameSession: HTMLButtonElement;
  forkSession: HTMLButtonElement;
  clearSession: HTMLButtonElement;
  deleteSession: HTMLButtonElement;
  jobs: HTMLElement;
  transcript: HTMLElement;
  jumpLatest: HTMLButtonElement;
  queue: HTMLElement;
  composer: HTMLFormElement;
  composerInput: HTMLTextAreaElement;
  cancelTurn: HTMLButtonElement;
  textDialog: HTMLDialogElement;
}

function byTestId<T extends HTMLElement>(root: ParentNode, id: string): T {
  const el = root.querySelector<T>(`[data-testid="${id}"]`);
  if (!el) throw new Error(`index.html lacks [data-testid="${id}"]`);
  return el;
}

export function findElements(root: ParentNode): ConsoleElements {
  const get = <T extends HTMLElement>(id: string) => byTestId<T>(root, id);
  const connection = get("connection");
  return {
    app: get("app"),
    connection,
    connectionLabel: connection.querySelector<HTMLElement>(".connection-label")!,
    restartNotice: get("restart-notice"),
    dismissNotice: get("dismiss-notice"),
    authNotice: get("auth-notice"),
    authMessage: get("auth-message"),
    tokenForm: get("token-form"),
    tokenInput: get("token-input"),
    send: get("send"),
    toast: get("toast"),
    toggleSidebar: get("toggle-sidebar"),
    newSession: get("new-session"),
    showDismissed: get("show-dismissed"),
    forgetBrowser: get("forget-browser"),
    search: get("search"),
    searchHits: get("search-hits"),
    sessionList: get("session-list"),
    emptyState: get("empty-state"),
    session: get("session"),
    sessionTitle: get("session-title"),
    followState: get("follow-state"),
    agentStatus: get("agent-status"),
    forkOrigin: get("fork-origin"),
    renameSession: get("rename-session"),
    forkSession: get("fork-session"),
    clearSession: get("clear-session"),
    deleteSession: get("delete-session"),
    jobs: get("jobs"),
    transcript: get("transcript"),
    jumpLatest: get("jump-latest"),
    queue: get("queue"),
    composer: get("composer"),
    composerInput: get("composer-input"),
    cancelTurn: get("cancel-turn"),
    textDialog: get("text-dialog"),
  };
}
