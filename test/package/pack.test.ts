import { execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { cpSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { tempDir } from "../support/temp-dir.js";

const run = promisify(execFile);
const repo = resolve(import.meta.dirname, "../..");

/** What `npm pack` reads: a copy, so the build it runs never touches this checkout's dist/. */
const PACKAGE_SOURCES = [
  "package.json",
  "README.md",
  "LICENSE",
  "tsconfig.json",
  "tsconfig.build.json",
  "src",
  "protocol",
  "web",
];

/**
 * The package as a user gets it: `npm pack` (which builds through `prepack`) of a copy of the
 * sources, unpacked into an empty project. Its dependencies are linked from this checkout's node_modules rather than
 * fetched: the registry and a native rebuild of better-sqlite3 would make this test slow and
 * dependent on the network, and what it checks is the tarball, not npm. Only runtime
 * dependencies are linked (no @types/* but @types/node), so a type that leaks a dev dependency
 * fails the type check.
 */
const project = tempDir("sessionmux-consumer-");
let files: string[] = [];

beforeAll(async () => {
  const packDir = join(project.path, "pack");
  const source = join(project.path, "source");
  mkdirSync(packDir);
  for (const entry of PACKAGE_SOURCES) {
    if (existsSync(join(repo, entry))) cpSync(join(repo, entry), join(source, entry), { recursive: true });
  }
  symlinkSync(join(repo, "node_modules"), join(source, "node_modules"), "dir");
  const { stdout } = await run("npm", ["pack", "--json", "--pack-destination", packDir], {
    cwd: source,
    maxBuffer: 16 * 1024 * 1024,
  });
  const [packed] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
  if (!packed) throw new Error("npm pack printed no package");
  files = packed.files.map((f) => f.path);
  const installed = join(project.path, "node_modules", "sessionmux");
  mkdirSync(installed, { recursive: true });
  await run("tar", ["-xzf", join(packDir, packed.filename), "-C", installed, "--strip-components=1"]);
  const manifest = JSON.parse(readFileSync(join(installed, "package.json"), "utf8")) as {
    dependencies: Record<string, string>;
  };
  for (const name of [...Object.keys(manifest.dependencies), "@types/node", "undici-types"]) {
    const link = join(project.path, "node_modules", name);
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(join(repo, "node_modules", name), link, "dir");
  }
  writeFileSync(join(project.path, "package.json"), JSON.stringify({ name: "consumer", type: "module" }));
}, 600_000);

afterAll(() => project.remove());

const CONSUMER = `
import { createServer } from "node:http";
import { once } from "node:events";
import { createSessionmux, DemoAgent } from "sessionmux";

const mux = await createSessionmux({
  db: process.argv[2],
  basePath: "/chat",
  agent: new DemoAgent(),
  authenticate: (req) => (req.headers.authorization === "Bearer ok" ? { name: "app", admin: false } : undefined),
});
const server = createServer((req, res) => res.end("app route"));
mux.attach(server);
server.listen(0, "127.0.0.1");
await once(server, "listening");
const base = "http://127.0.0.1:" + server.address().port;
const answers = {
  app: await (await fetch(base + "/anything")).text(),
  health: (await fetch(base + "/chat/healthz")).status,
  refused: (await fetch(base + "/chat/api/chat/sessions")).status,
  listed: (await fetch(base + "/chat/api/chat/sessions", { headers: { authorization: "Bearer ok" } })).status,
};
await mux.close();
server.close();
process.stdout.write(JSON.stringify(answers));
`;

describe("the packed sessionmux package", () => {
  it("ships the build and no tests, benches, images or source maps", () => {
    expect(files).toContain("dist/src/index.js");
    expect(files).toContain("dist/src/index.d.ts");
    expect(files).toContain("dist/src/cli/main.js");
    expect(files).toContain("dist/web/index.html");
    expect(files.filter((f) => /^(test|bench|src|web)\/|\.png$|\.map$|tsbuildinfo/.test(f))).toEqual([]);
  });

  it("imports from Node ESM and mounts on an app's server", async () => {
    writeFileSync(join(project.path, "main.mjs"), CONSUMER);
    const { stdout } = await run(process.execPath, ["main.mjs", join(project.path, "sessions.db")], {
      cwd: project.path,
      timeout: 60_000,
    });
    expect(JSON.parse(stdout)).toEqual({ app: "app route", health: 200, refused: 401, listed: 200 });
  });

  it("runs its CLI from the installed package and serves the shipped console", async () => {
    const main = join(project.path, "node_modules", "sessionmux", "dist", "src", "cli", "main.js");
    const child = spawn(
      process.execPath,
      [main, "serve", "--port", "0", "--db", join(project.path, "cli.db")],
      {
        cwd: project.path,
        env: { ...process.env, SESSIONMUX_TOKEN: "packed" },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    try {
      let output = "";
      child.stdout.on("data", (d: Buffer) => (output += d.toString()));
      const url = await vi.waitFor(
        () => {
          const found = /listening on (\S+)/.exec(output)?.[1];
          if (!found) throw new Error(`not listening yet: ${output}`);
          return found;
        },
        { timeout: 30_000, interval: 50 },
      );
      const page = await fetch(`${url}/`);
      expect(page.status).toBe(200);
      // the built page, not the "console is not built" fallback
      expect(await page.text()).toMatch(/assets\/index-[\w-]+\.js/);
      expect((await fetch(`${url}/readyz`)).status).toBe(200);
    } finally {
      child.kill("SIGTERM");
      await once(child, "exit");
    }
  });

  it("type-checks a consumer with skipLibCheck off and only @types/node", async () => {
    writeFileSync(
      join(project.path, "main.ts"),
      [
        'import { createSessionmux, type AgentDriver, type SessionEvent, type Sessionmux } from "sessionmux";',
        "export const mounted: Promise<Sessionmux> = createSessionmux({ db: 'x.db' });",
        "export type Parts = [AgentDriver, SessionEvent];",
      ].join("\n"),
    );
    writeFileSync(
      join(project.path, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          module: "NodeNext",
          moduleResolution: "NodeNext",
          target: "ES2022",
          strict: true,
          skipLibCheck: false,
          noEmit: true,
          types: ["node"],
        },
        files: ["main.ts"],
      }),
    );
    const tsc = join(repo, "node_modules", "typescript", "bin", "tsc");
    const result = await run(process.execPath, [tsc, "-p", project.path], { cwd: project.path }).catch(
      (err: { stdout?: string }) => ({ stdout: err.stdout ?? String(err) }),
    );
    expect(result.stdout).toBe("");
    // a whole-program check of the declarations: minutes on a loaded machine
  }, 300_000);

  it("offers the AI SDK agents at sessionmux/ai-sdk, whose types check with skipLibCheck off", async () => {
    writeFileSync(
      join(project.path, "ai.ts"),
      [
        'import type { AgentDriver } from "sessionmux";',
        'import { defineTool, OpenAIAgent } from "sessionmux/ai-sdk";',
        "const echo = defineTool({",
        '  name: "echo",',
        '  inputSchema: { type: "object", properties: { text: { type: "string" } } },',
        "  needsApproval: true,",
        "  execute: (input: { text: string }) => input.text,",
        "});",
        'export const agent: AgentDriver = new OpenAIAgent({ baseURL: "http://127.0.0.1:9/v1", model: "m", tools: [echo] });',
      ].join("\n"),
    );
    writeFileSync(
      join(project.path, "tsconfig.ai.json"),
      JSON.stringify({
        compilerOptions: {
          module: "NodeNext",
          moduleResolution: "NodeNext",
          target: "ES2022",
          strict: true,
          skipLibCheck: false,
          noEmit: true,
          types: ["node"],
        },
        files: ["ai.ts"],
      }),
    );
    const tsc = join(repo, "node_modules", "typescript", "bin", "tsc");
    const checked = await run(process.execPath, [tsc, "-p", join(project.path, "tsconfig.ai.json")], {
      cwd: project.path,
    }).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? String(err) }));
    expect(checked.stdout).toBe("");
    const loaded = await run(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        'const { OpenAIAgent } = await import("sessionmux/ai-sdk"); process.stdout.write(new OpenAIAgent({ baseURL: "http://127.0.0.1:9/v1", model: "m" }).name);',
      ],
      { cwd: project.path },
    );
    expect(loaded.stdout).toBe("openai");
  }, 300_000);
});
