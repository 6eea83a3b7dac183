const STORAGE_KEY = "sessionmux.token";

/**
 * The token arrives once in the URL fragment (`/#token=…`, as `sessionmux serve` prints it). It is
 * kept in `sessionStorage` (this tab only) and removed from the address bar so it does not linger
 * in history, bookmarks or screenshots.
 */
export function takeAccessToken(loc: Location, storage: Storage, history: History): string | undefined {
  const fragment = new URLSearchParams(loc.hash.startsWith("#") ? loc.hash.slice(1) : loc.hash);
  const fromUrl = fragment.get("token");
  if (fromUrl) {
    storage.setItem(STORAGE_KEY, fromUrl);
    fragment.delete("token");
    const rest = fragment.toString();
    history.replaceState(history.state, "", `${loc.pathname}${loc.search}${rest ? `#${rest}` : ""}`);
    return fromUrl;
  }
  return storage.getItem(STORAGE_KEY) ?? undefined;
}

/** Keeps a token typed into the console for this tab, as one taken from the URL is kept. */
export function keepAccessToken(storage: Storage, token: string): void {
  storage.setItem(STORAGE_KEY, token);
}

/** `ws://` or `wss://` to the mux on the same host that served the page. */
export function muxUrl(loc: Location): string {
  const scheme = loc.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${loc.host}/api/remote.mux`;
}
