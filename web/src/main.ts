import { muxUrl, takeAccessToken } from "./access-token.js";
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
const token = takeAccessToken(location, sessionStorage, history);
if (!token) {
  elements.authNotice.hidden = false;
  elements.connection.dataset.state = "closed";
  elements.connectionLabel.textContent = "No token";
} else {
  const app = new ConsoleApp(
    elements,
    ConsoleLink.open(muxUrl(location), token),
    new SessionCache(localStorage, token),
    rememberSession,
  );
  app.start(sessionFromFragment());
  // A link or a typed `#s=<id>` switches the session without a reload.
  addEventListener("hashchange", () => app.select(sessionFromFragment()));
}
