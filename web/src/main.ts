import { cachePartition, dropAccessToken, keepAccessToken, muxUrl, takeAccessToken } from "./access-token.js";
import { ConsoleApp } from "./console-app.js";
import { findElements } from "./console-elements.js";
import { ConsoleLink } from "./console-link.js";
import { forgetBrowser, openCacheStores, SessionCache } from "./session-cache.js";

/** The shown session lives in the fragment (`#s=<id>`) so a reload comes back to it. */
function sessionFromFragment(): string | undefined {
  return new URLSearchParams(location.hash.slice(1)).get("s") ?? undefined;
}

function rememberSession(sessionId: string | undefined): void {
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (sessionId) fragment.set("s", sessionId);
  else fragment.delete("s");
  const rest = fragment.toString();
  history.replaceState(history.state, "", `${location.pathname}${location.search}${rest ? `#${rest}` : ""}`);
}

const elements = findElements(document);
const cacheStores = openCacheStores();
let app: ConsoleApp | undefined;
let cache: SessionCache | undefined;

/** Starts the console with `token` (kept for this tab already), or moves the running one to it. */
function start(token: string): void {
  cache?.close();
  cache = new SessionCache(cachePartition(sessionStorage), cacheStores);
  if (app) {
    app.useToken(token, cache);
    return;
  }
  app = new ConsoleApp(elements, ConsoleLink.open(muxUrl(location), token), cache, rememberSession);
  app.start(sessionFromFragment());
}

// Everything this console kept in this browser goes: cached transcripts of every token, and the token.
elements.forgetBrowser.addEventListener("click", () => {
  if (!confirm("Forget this browser? Cached transcripts and this tab's access token are removed.")) return;
  dropAccessToken(sessionStorage);
  cache?.close();
  void forgetBrowser(cacheStores).finally(() => location.replace(location.pathname));
});

// A token typed into the notice, or a printed URL opened again in this tab, continues without a reload.
elements.tokenForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const token = elements.tokenInput.value.trim();
  if (token === "") return;
  elements.tokenInput.value = "";
  keepAccessToken(sessionStorage, token);
  start(token);
});
addEventListener("hashchange", () => {
  const fresh = new URLSearchParams(location.hash.slice(1)).get("token");
  if (fresh) {
    const shown = sessionFromFragment();
    start(takeAccessToken(location, sessionStorage, history) ?? fresh);
    if (shown) app?.select(shown);
    return;
  }
  // A link or a typed `#s=<id>` switches the session without a reload.
  app?.select(sessionFromFragment());
});

const token = takeAccessToken(location, sessionStorage, history);
if (token) {
  start(token);
} else {
  elements.authNotice.hidden = false;
  elements.connection.dataset.state = "closed";
  elements.connectionLabel.textContent = "No token";
}
