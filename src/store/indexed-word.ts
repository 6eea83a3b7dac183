import { Limits } from "../../protocol/index.js";

/**
 * A word as both search indexes hold it: lower case, its letters' accents dropped (`Café` is
 * `cafe`), as SQLite's `remove_diacritics` tokenizer reads it and the PostgreSQL store writes it.
 */
export function indexedForm(word: string): string {
  return word
    .normalize("NFD")
    .replace(/[\u0300-\u036f]/gu, "")
    .toLowerCase();
}

/**
 * Whether a query's last run of letters and digits may match as a prefix: its indexed form is at
 * least `Limits.searchPrefixMinBytes` long in UTF-8, the bytes both indexes keep words in.
 */
export function longEnoughForPrefix(run: string): boolean {
  return Buffer.byteLength(indexedForm(run), "utf8") >= Limits.searchPrefixMinBytes;
}
