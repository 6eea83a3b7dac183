/**
 * `target` with some members replaced and the rest its own (methods bound to it): what one party
 * sees of an object the test shares with others (a store whose reads are slowed or counted, whose
 * notices are held or dropped, or one of whose calls fails).
 */
export function withMembers<T extends object>(target: T, replaced: Partial<T>): T {
  return new Proxy(target, {
    get(inner, key) {
      if (Object.hasOwn(replaced, key)) return replaced[key as keyof T];
      const value = Reflect.get(inner, key, inner);
      return typeof value === "function" ? value.bind(inner) : value;
    },
  });
}
