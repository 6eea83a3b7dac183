const STORAGE_KEY = "sessionmux.token";
const PARTITION_KEY = "sessionmux.cachePartition";

/**
 * The token arrives once in the URL fragment (`/#token=…`, as `sessionmux serve` prints it). It is
 * kept in `sessionStorage` (this tab only) and removed from the address bar so it does not linger
 * in history, bookmarks or screenshots.
 */
export function takeAccessToken(loc: Location, storage: Storage, history: History): string | undefined {
  const fragment = new URLSearchParams(loc.hash.startsWith("#") ? loc.hash.slice(1) : loc.hash);
  const fromUrl = fragment.get("token");
  if (fromUrl) {
    keepAccessToken(storage, fromUrl);
    fragment.delete("token");
    const rest = fragment.toString();
    history.replaceState(history.state, "", `${loc.pathname}${loc.search}${rest ? `#${rest}` : ""}`);
    return fromUrl;
  }
  return storage.getItem(STORAGE_KEY) ?? undefined;
}

/**
 * Keeps a token for this tab. A token other than the kept one starts a new cache partition: what
 * one token's principal cached is never shown under another token.
 */
export function keepAccessToken(storage: Storage, token: string): void {
  if (storage.getItem(STORAGE_KEY) !== token) storage.removeItem(PARTITION_KEY);
  storage.setItem(STORAGE_KEY, token);
}

/** Forgets this tab's token and cache partition ("forget this browser"). */
export function dropAccessToken(storage: Storage): void {
  storage.removeItem(STORAGE_KEY);
  storage.removeItem(PARTITION_KEY);
}

/**
 * The name of this tab's cache partition: random, kept beside the token (so a reload finds its
 * cache) and never derived from it.
 */
export function cachePartition(storage: Storage): string {
  let partition = storage.getItem(PARTITION_KEY);
  if (!partition) {
    const bytes = crypto.getRandomValues(new Uint8Array(12));
    partition = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
    storage.setItem(PARTITION_KEY, partition);
  }
  return partition;
}

/**
 * `ws://` or `wss://` to the mux beside the page: resolved against the page's folder, so a
 * console served under a base path (`/chat/`) reaches `/chat/api/remote.mux`, and one at the
 * root reaches `/api/remote.mux`.
 */
export function muxUrl(loc: Pick<Location, "href">): string {
  const url = new URL("api/remote.mux", loc.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  url.hash = "";
  return url.href;
}
