import { fileURLToPath } from "node:url";
import { build } from "vite";
import { tempDir } from "../support/temp-dir.js";

const configFile = fileURLToPath(new URL("../../web/vite.config.ts", import.meta.url));

/**
 * Builds the console with its own Vite config into a fresh folder, so test files running in
 * parallel (and a `npm run build` at the same time) never share an output folder.
 */
export async function buildConsole(): Promise<{ webRoot: string; remove(): void }> {
  const dir = tempDir("sessionmux-web-");
  await build({
    configFile,
    logLevel: "error",
    build: { outDir: dir.path, emptyOutDir: true, sourcemap: false },
  });
  return { webRoot: dir.path, remove: dir.remove };
}
