import { keepAccessToken, muxUrl, takeAccessToken } from "./access-token.js";
import { ConsoleApp } from "./console-app.js";
import { findElements } from "./console-elements.js";
import { ConsoleLink } from "./console-link.js";
import { SessionCache } from "./session-cache.js";

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
let app: ConsoleApp | undefined;

function start(token: string): void {
  if (app) {
    app.useToken(token);
    return;
  }
  app = new ConsoleApp(
    elements,
    ConsoleLink.open(muxUrl(location), token),
    new SessionCache(localStorage, token),
    rememberSession,
  );
  app.start(sessionFromFragment());
}

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
