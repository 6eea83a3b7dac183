/**
 * Holds back the NOTIFYs a PostgreSQL store's commit feed hears until `release`, as a slow LISTEN
 * connection does; `held` is what it heard meanwhile. `store`: the store, or a running host's.
 */
export function holdNotices(store: object): { held: string[]; release(): void } {
  const feed = (store as { feed: { heard(text: string): void } }).feed;
  const hear = feed.heard.bind(feed);
  const held: string[] = [];
  feed.heard = (text) => held.push(text);
  return {
    held,
    release() {
      feed.heard = hear;
      for (const text of held.splice(0)) hear(text);
    },
  };
}
