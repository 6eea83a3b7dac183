/** The symbol each branded class is registered under, in this copy of the module. */
const brands = new WeakMap<object, symbol>();

/**
 * Makes `instanceof` hold across copies of the error classes: `sessionmux` and
 * `@sessionmux/client` each carry their own, so an error made by one failed `instanceof` against the
 * other's class of the same name. Each instance carries a process-wide symbol
 * (`Symbol.for("sessionmux.error.<name>")`) on its class's prototype, and the class answers
 * `instanceof` by that symbol. A subclass that is not branded itself (one an application
 * declares) keeps the ordinary prototype check.
 */
export function brandErrorClass(errorClass: abstract new (...args: never[]) => Error, name: string): void {
  const brand = Symbol.for(`sessionmux.error.${name}`);
  brands.set(errorClass, brand);
  Object.defineProperty(errorClass.prototype, brand, { value: true });
  Object.defineProperty(errorClass, Symbol.hasInstance, { value: hasBrand, configurable: true });
}

function hasBrand(this: object, value: unknown): boolean {
  const brand = brands.get(this);
  if (brand === undefined) return Function.prototype[Symbol.hasInstance].call(this, value);
  return typeof value === "object" && value !== null && brand in value;
}
