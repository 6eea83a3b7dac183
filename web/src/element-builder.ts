type Attrs = Record<string, string | number | boolean | undefined>;
type Child = Node | string | null | undefined | false;

/**
 * Builds one element. Attributes that are `false` or `undefined` are left out, `true` sets an
 * empty attribute. Text always goes through text nodes, never through HTML parsing, so content
 * from the log cannot inject markup.
 */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    el.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return el;
}

/**
 * Keeps `container`'s children in the order of `items`, re-creating an item's element only when
 * the item changed (`same`, identity by default). The transcript reducer copies what it touches,
 * so identity tells us exactly which messages changed.
 */
export class KeyedList<T> {
  private readonly rendered = new Map<string, { item: T; el: HTMLElement }>();

  constructor(
    private readonly container: HTMLElement,
    private readonly key: (item: T) => string,
    private readonly create: (item: T) => HTMLElement,
    private readonly same: (a: T, b: T) => boolean = (a, b) => a === b,
  ) {}

  update(items: readonly T[]): void {
    const seen = new Set<string>();
    let cursor: ChildNode | null = this.container.firstChild;
    for (const item of items) {
      const key = this.key(item);
      seen.add(key);
      let entry = this.rendered.get(key);
      if (!entry || !this.same(entry.item, item)) {
        const el = this.create(item);
        if (entry) {
          // The cursor may be the element being replaced: it must keep pointing into the container.
          if (cursor === entry.el) cursor = el;
          entry.el.replaceWith(el);
        }
        entry = { item, el };
        this.rendered.set(key, entry);
      }
      if (entry.el !== cursor) this.container.insertBefore(entry.el, cursor);
      cursor = entry.el.nextSibling;
    }
    for (const [key, entry] of this.rendered) {
      if (seen.has(key)) continue;
      entry.el.remove();
      this.rendered.delete(key);
    }
  }

  /** Forgets everything (another session is shown, or the log was reset). */
  clear(): void {
    for (const entry of this.rendered.values()) entry.el.remove();
    this.rendered.clear();
  }
}

/** Short relative time for list rows ("now", "5m", "3h", "2d", then a date). */
export function relativeTime(at: number, now: number): string {
  const s = Math.max(0, Math.round((now - at) / 1000));
  if (s < 45) return "now";
  if (s < 3600) return `${Math.round(s / 60)}m`;
  if (s < 86_400) return `${Math.round(s / 3600)}h`;
  if (s < 7 * 86_400) return `${Math.round(s / 86_400)}d`;
  return new Date(at).toLocaleDateString();
}
