import { MUX_PATH } from "../../protocol/index.js";
import { StartupError } from "../operations/startup-error.js";
import { isHostRoute } from "../transport/http/router.js";

/**
 * Which requests of a shared server belong to sessionmux. Under a non-empty `basePath` every
 * path below it does (the console included); at the root only the host's own routes do, so an
 * app keeps `/`, its `/api/users` and everything else.
 */
export class BasePath {
  readonly prefix: string;

  constructor(
    basePath: string | undefined,
    private readonly claimAll: boolean,
  ) {
    this.prefix = normalize(basePath ?? "");
  }

  /** The request target relative to the base path, or `undefined` when the request is the app's. */
  claim(url: string | undefined): string | undefined {
    if (url === undefined) return undefined;
    const inner = this.#strip(url);
    if (inner === undefined) return undefined;
    if (this.claimAll || this.prefix !== "") return inner;
    return isHostRoute(pathOf(inner)) ? inner : undefined;
  }

  /** The upgrade target relative to the base path when it is the mux's, else `undefined`. */
  claimUpgrade(url: string | undefined): string | undefined {
    const inner = url === undefined ? undefined : this.#strip(url);
    return inner !== undefined && pathOf(inner) === MUX_PATH ? inner : undefined;
  }

  /**
   * `/chat/` for a request of `/chat` itself (query kept): the console's assets and its mux URL
   * are relative to the page's folder, which is the base path only with its trailing slash.
   */
  slashRedirect(url: string | undefined): string | undefined {
    if (this.prefix === "" || url === undefined) return undefined;
    return url === this.prefix || url.startsWith(`${this.prefix}?`)
      ? `${this.prefix}/${url.slice(this.prefix.length)}`
      : undefined;
  }

  #strip(url: string): string | undefined {
    if (this.prefix === "") return url;
    if (!url.startsWith(this.prefix)) return undefined;
    const rest = url.slice(this.prefix.length);
    if (rest === "" || rest.startsWith("?")) return `/${rest}`;
    return rest.startsWith("/") ? rest : undefined;
  }
}

/**
 * `"/chat/"` → `"/chat"`, `"/"` → `""`; a path that does not start with `/` is a mistake, refused
 * as every other bad option is (a plain TypeError gave the app no code to tell it by).
 */
function normalize(basePath: string): string {
  if (basePath === "" || basePath === "/") return "";
  if (!basePath.startsWith("/") || /[?#\s]/.test(basePath)) {
    throw new StartupError(
      "option_invalid",
      `basePath must be a path starting with "/", got ${JSON.stringify(basePath)}`,
    );
  }
  return basePath.replace(/\/+$/, "");
}

function pathOf(url: string): string {
  const q = url.indexOf("?");
  return q === -1 ? url : url.slice(0, q);
}
