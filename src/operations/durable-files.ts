import { closeSync, fsyncSync, openSync, writeSync } from "node:fs";

/**
 * Creates `path` (refused if it exists) holding `text`, synced to disk before it is closed: a file
 * about to be linked or renamed into place must be whole on disk first, or a power cut could
 * leave the new name pointing at an empty file.
 */
export function writeNewFileSynced(path: string, text: string, mode: number): void {
  const fd = openSync(path, "wx", mode);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Syncs a folder's entries: a link or rename into it is durable only once its folder is. */
export function syncFolder(folder: string): void {
  syncOpened(folder);
}

/** Syncs a file's contents: a copy about to be renamed into place must be whole on disk first. */
export function syncFile(file: string): void {
  syncOpened(file);
}

function syncOpened(path: string): void {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
