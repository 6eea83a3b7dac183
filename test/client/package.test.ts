import { execFile } from "node:child_process";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { readmeExample } from "../support/readme-example.js";
import { tempDir } from "../support/temp-dir.js";

const run = promisify(execFile);
const REPO = resolve(".");
const PACKAGE = resolve("packages/client");
/** The size goal of issue 13 for the gzipped browser bundle of the whole client index. */
const BUNDLE_GOAL_BYTES = 20 * 1024;
const ADMIN = { name: "admin", admin: true };
/** Where the README's examples connect; the tests' host listens elsewhere. */
const README_URL = '"ws://127.0.0.1:8787/api/remote.mux"';
const SERVER_ONLY = ["better-sqlite3", "pino", "prom-client", "ws", "commander", "@a2a-js/sdk", "bindings"];

let project: ReturnType<typeof tempDir>;
let host: TestHost;

/** Every file under `dir` (node_modules included). */
function walk(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) walk(path, out);
    else out.push(path);
  }
  return out;
}

beforeAll(async () => {
  project = tempDir("sessionmux-client-pkg-");
  // `npm pack` runs `prepack`, which builds dist/ from src/client and protocol/.
  const { stdout } = await run("npm", ["pack", "--json", "--pack-destination", project.path], {
    cwd: PACKAGE,
    maxBuffer: 16 * 1024 * 1024,
  });
  const [packed] = JSON.parse(stdout) as [{ filename: string }];
  writeFileSync(
    project.file("package.json"),
    JSON.stringify({ name: "consumer", private: true, type: "module" }),
  );
  // Offline first: dependencies come from the npm cache when they are there.
  await run(
    "npm",
    ["install", "--prefer-offline", "--no-audit", "--no-fund", project.file(packed.filename)],
    { cwd: project.path, maxBuffer: 16 * 1024 * 1024 },
  );
  host = await startTestHost();
}, 180_000);

afterAll(async () => {
  await host?.dispose();
  project?.remove();
});

describe("the @sessionmux/client tarball installed alone", () => {
  it("brings no native module and no server dependency", () => {
    const modules = project.file("node_modules");
    const files = walk(modules);
    expect(files.filter((f) => f.endsWith(".node"))).toEqual([]);
    const installed = readdirSync(modules).flatMap((name) =>
      name.startsWith("@") ? readdirSync(join(modules, name)).map((sub) => `${name}/${sub}`) : [name],
    );
    for (const server of SERVER_ONLY) expect(installed).not.toContain(server);
    expect(installed).toEqual(expect.arrayContaining(["@sessionmux/client", "@msgpack/msgpack", "rxjs"]));
    expect(readdirSync(join(modules, "@sessionmux/client"))).toContain("LICENSE");
    const packages = installed.filter((n) => !n.startsWith("."));
    console.log(`client install: ${packages.length} packages: ${packages.join(", ")}`);
  });

  it("imports in Node ESM and talks to a real host", async () => {
    const script = `
      import { createClient, DEFAULT_CALL_TIMEOUT_MS } from "@sessionmux/client";
      import WebSocket from ${JSON.stringify(join(REPO, "node_modules/ws/wrapper.mjs"))};
      const client = createClient({ url: process.argv[2], token: process.argv[3], WebSocket });
      const created = await client.create({ sessionId: "from-package" });
      const list = await client.list();
      await client.close();
      console.log(JSON.stringify({ id: created.header.sessionId, rows: list.sessions.length, timeout: DEFAULT_CALL_TIMEOUT_MS }));
    `;
    writeFileSync(project.file("use.mjs"), script);
    const { stdout } = await run(process.execPath, ["use.mjs", host.wsUrl, ADMIN_TOKEN], {
      cwd: project.path,
    });
    expect(JSON.parse(stdout)).toEqual({ id: "from-package", rows: 1, timeout: 30_000 });
  });

  it("runs the README's quickstart as written: it prints the agent's streamed answer and exits", async () => {
    // only where the host listens, and where `ws` is installed, differ from the user's project
    const code = await readmeExample(
      "## Quickstart with the SDK",
      [
        [README_URL, JSON.stringify(host.wsUrl)],
        ['from "ws"', `from ${JSON.stringify(join(REPO, "node_modules/ws/wrapper.mjs"))}`],
      ],
      "esm",
    );
    writeFileSync(project.file("quickstart.mjs"), code);
    const { stdout } = await run(process.execPath, ["quickstart.mjs"], {
      cwd: project.path,
      env: { ...process.env, SESSIONMUX_TOKEN: ADMIN_TOKEN },
      timeout: 60_000,
    });
    const { sessions } = await host.host.call(ADMIN, "session.list", {});
    const created = sessions.filter((row) => row.title === "hello");
    expect(created).toHaveLength(1);
    const page = await host.host.call(ADMIN, "session.page", {
      sessionId: created[0]!.sessionId,
      afterSeq: 0,
    });
    const answer = page.events
      .flatMap((e) => (e.type === "assistant/delta" ? [(e.data as { text: string }).text] : []))
      .join("");
    expect(page.events.at(-1)?.type).toBe("turn/end");
    expect(answer.length).toBeGreaterThan(0);
    expect(stdout).toBe(answer);
  });

  it("runs the README's SDK example: the demo's streamed turn, event by event, then the connection's states", async () => {
    // what a browser page has and Node 20 lacks: a global WebSocket; and the page's own token
    const page = [
      `import WebSocket from ${JSON.stringify(join(REPO, "node_modules/ws/wrapper.mjs"))};`,
      "globalThis.WebSocket = WebSocket;",
      "const token = process.env.SESSIONMUX_TOKEN;",
    ].join("\n");
    const code = await readmeExample("## Client SDK", [[README_URL, JSON.stringify(host.wsUrl)]], "esm");
    writeFileSync(project.file("sdk-example.mjs"), `${page}\n${code}`);
    const { stdout } = await run(process.execPath, ["sdk-example.mjs"], {
      cwd: project.path,
      env: { ...process.env, SESSIONMUX_TOKEN: ADMIN_TOKEN },
      timeout: 60_000,
    });
    const lines = stdout.trim().split("\n");
    const events = lines.filter((line) => /^\d+ /.test(line));
    // `/stream 5 50`: five deltas between the prompt and the turn's end, in seq order from 1
    expect(events[0]).toBe("1 session/created");
    expect(events.map((line) => Number(line.split(" ")[0]))).toEqual(events.map((_, i) => i + 1));
    expect(events.filter((line) => line.endsWith(" assistant/delta"))).toHaveLength(5);
    expect(events.at(-1)).toMatch(/ turn\/end$/);
    expect(lines.slice(events.length)).toEqual(["open", "closed"]);
  });

  it("bundles for the browser under the size goal, with no Node module", async () => {
    writeFileSync(project.file("entry.js"), 'export * from "@sessionmux/client";\n');
    const result = await build({
      entryPoints: [project.file("entry.js")],
      absWorkingDir: project.path,
      bundle: true,
      minify: true,
      format: "esm",
      platform: "browser",
      write: false,
      logLevel: "silent",
      metafile: true,
    });
    const code = result.outputFiles[0]!.contents;
    const gzipped = gzipSync(code, { level: 9 }).length;
    console.log(`@sessionmux/client browser bundle: ${code.length} B minified, ${gzipped} B gzipped`);
    expect(gzipped).toBeLessThanOrEqual(BUNDLE_GOAL_BYTES);
    const inputs = Object.keys(result.metafile.inputs);
    expect(inputs.filter((i) => /node_modules\/(ws|@sinclair)\//.test(i))).toEqual([]);
  });

  it("has types that resolve with skipLibCheck false", async () => {
    writeFileSync(
      project.file("consumer.ts"),
      `import { createClient, type FollowUpdate, type ConnectionState } from "@sessionmux/client";
       import { createNodeClient } from "@sessionmux/client/node";
       const client = createClient({ url: "ws://127.0.0.1:1/api/remote.mux", token: "t" });
       const state: ConnectionState = client.state;
       export async function read(): Promise<number> {
         let n = 0;
         for await (const update of client.follow("s")) if ((update satisfies FollowUpdate).kind === "events") n += 1;
         const rows = await client.list({ limit: 5 }, { timeoutMs: 1_000, signal: AbortSignal.timeout(2_000) });
         return n + rows.sessions.length + (state.name === "open" ? 1 : 0);
       }
       export const node = createNodeClient;
      `,
    );
    writeFileSync(
      project.file("tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          lib: ["ES2023", "DOM"],
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          skipLibCheck: false,
          noEmit: true,
          types: [],
        },
        files: ["consumer.ts"],
      }),
    );
    const tsc = join(REPO, "node_modules/typescript/bin/tsc");
    const outcome = await run(process.execPath, [tsc, "-p", "tsconfig.json"], { cwd: project.path }).catch(
      (error: { stdout: string }) => error,
    );
    expect(outcome.stdout).toBe("");
    const manifest = JSON.parse(readFileSync(join(PACKAGE, "package.json"), "utf8")) as { exports: object };
    expect(Object.keys(manifest.exports)).toEqual([".", "./node", "./package.json"]);
    // a full type-check of the package and its dependencies' types: a minute or more on a busy machine
  }, 300_000);

  it("type-checks every TypeScript sample of its README, strict, against the installed package", async () => {
    const readme = readFileSync(join(PACKAGE, "README.md"), "utf8");
    const samples = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]!);
    expect(samples.length).toBeGreaterThanOrEqual(2);
    // the samples leave where the token comes from to the app, as a page or a script has it
    const files = samples.map((sample, index) => {
      const file = `readme-sample-${index + 1}.ts`;
      writeFileSync(project.file(file), `declare const token: string;\n${sample}`);
      return file;
    });
    writeFileSync(
      project.file("tsconfig.readme.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          lib: ["ES2023", "DOM"],
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          noEmit: true,
          types: [],
        },
        files,
      }),
    );
    const tsc = join(REPO, "node_modules/typescript/bin/tsc");
    const outcome = await run(process.execPath, [tsc, "-p", "tsconfig.readme.json"], {
      cwd: project.path,
    }).catch((error: { stdout: string }) => error);
    expect(outcome.stdout).toBe("");
    // one tsc run for every sample, which takes a minute or more on a busy machine
  }, 300_000);
});
