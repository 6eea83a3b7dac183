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
    expect(files).toContain("LICENSE");
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

  it("loads from CommonJS with require, as Node 20.19 and later load an ES module", async () => {
    // no "default" condition beside "import" made require fail with ERR_PACKAGE_PATH_NOT_EXPORTED
    const { stdout } = await run(
      process.execPath,
      [
        "-e",
        'const s = require("sessionmux"); const a = require("sessionmux/ai-sdk"); process.stdout.write(typeof s.createSessionmux + " " + typeof a.OpenAIAgent);',
      ],
      { cwd: project.path },
    );
    expect(stdout).toBe("function function");
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
        // what mux.connect's client answers, typed without @sessionmux/client installed
        'import type { Attachment, ConnectionState, ControlMirror, DownloadOptions, LiveStream } from "sessionmux";',
        "export type ClientParts = [Attachment, ConnectionState, ControlMirror, DownloadOptions, LiveStream<ControlMirror>];",
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

/**
 * `@sessionmux/client` as a user gets it: `npm pack` of `packages/client` (its `prepack` builds
 * from the repository's `src/client` and `protocol`, so the copy keeps that layout), unpacked
 * beside the sessionmux package above, with only its own dependencies and `ws` linked.
 */
describe("the packed @sessionmux/client package", () => {
  beforeAll(async () => {
    const packDir = join(project.path, "pack-client");
    const source = join(project.path, "client-source");
    mkdirSync(packDir);
    for (const entry of ["packages/client", "src/client", "protocol"]) {
      cpSync(join(repo, entry), join(source, entry), { recursive: true });
    }
    symlinkSync(join(repo, "node_modules"), join(source, "node_modules"), "dir");
    const { stdout } = await run("npm", ["pack", "--json", "--pack-destination", packDir], {
      cwd: join(source, "packages", "client"),
      maxBuffer: 16 * 1024 * 1024,
    });
    const [packed] = JSON.parse(stdout) as { filename: string }[];
    if (!packed) throw new Error("npm pack printed no package");
    const installed = join(project.path, "node_modules", "@sessionmux", "client");
    mkdirSync(installed, { recursive: true });
    await run("tar", ["-xzf", join(packDir, packed.filename), "-C", installed, "--strip-components=1"]);
    for (const name of ["rxjs", "tslib", "ws", "@types/ws"]) {
      const link = join(project.path, "node_modules", name);
      if (existsSync(link)) continue;
      mkdirSync(dirname(link), { recursive: true });
      symlinkSync(join(repo, "node_modules", name), link, "dir");
    }
  }, 600_000);

  it("type-checks and runs an app with its own token auth and agent, switching on the client's error classes and codes", async () => {
    writeFileSync(join(project.path, "embed.ts"), EMBEDDING_APP);
    writeFileSync(
      join(project.path, "tsconfig.embed.json"),
      JSON.stringify({
        compilerOptions: {
          module: "NodeNext",
          moduleResolution: "NodeNext",
          target: "ES2022",
          strict: true,
          skipLibCheck: false,
          outDir: "embed-out",
          types: ["node"],
        },
        files: ["embed.ts"],
      }),
    );
    const tsc = join(repo, "node_modules", "typescript", "bin", "tsc");
    const checked = await run(process.execPath, [tsc, "-p", join(project.path, "tsconfig.embed.json")], {
      cwd: project.path,
    }).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? String(err) }));
    expect(checked.stdout).toBe("");
    // no kill: the script ends by itself only once every client and the host let go of their handles
    const { stdout } = await run(
      process.execPath,
      [join(project.path, "embed-out", "embed.js"), join(project.path, "embed.db")],
      { cwd: project.path, timeout: 120_000 },
    );
    expect(JSON.parse(stdout)).toEqual({
      app: "app route",
      seen: ["session/created", "turn/start", "user/message", "assistant/delta", "turn/end"],
      aborted: "aborted",
      missing: "session_not_found",
      browserStyle: 1,
      refused: "unauthorized",
      inProcess: "session_not_found",
      shared: [0, 1],
      observables: ["caughtUp", false],
    });
  }, 300_000);

  it("resolves the types of every entry point under the node10 resolution of a `module: commonjs` project", async () => {
    // that resolution reads no "exports": without "typesVersions" the subpaths had no types
    writeFileSync(
      join(project.path, "commonjs.ts"),
      [
        'import { createSessionmux } from "sessionmux";',
        'import { OpenAIAgent } from "sessionmux/ai-sdk";',
        'import { createClient } from "@sessionmux/client";',
        'import { createNodeClient } from "@sessionmux/client/node";',
        "export const entries = [createSessionmux, OpenAIAgent, createClient, createNodeClient];",
      ].join("\n"),
    );
    writeFileSync(
      join(project.path, "tsconfig.commonjs.json"),
      JSON.stringify({
        compilerOptions: {
          module: "CommonJS",
          moduleResolution: "Node10",
          target: "ES2022",
          strict: true,
          // what resolves is checked here; the declarations themselves are checked above
          skipLibCheck: true,
          noEmit: true,
          types: ["node"],
        },
        files: ["commonjs.ts"],
      }),
    );
    const tsc = join(repo, "node_modules", "typescript", "bin", "tsc");
    const checked = await run(process.execPath, [tsc, "-p", join(project.path, "tsconfig.commonjs.json")], {
      cwd: project.path,
    }).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? String(err) }));
    expect(checked.stdout).toBe("");
  }, 120_000);
});

/** What the README's embedding sections add up to, written against the two packed packages. */
const EMBEDDING_APP = `
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import {
  type AgentDriver,
  bearerToken,
  createSessionmux,
  type Principal,
  RemoteError as HostRemoteError,
  type SessionmuxClientApi as HostClientApi,
  type TurnContext,
  type TurnOutcome,
} from "sessionmux";
import { controlMirror, createClient, followSession } from "@sessionmux/client";
import { filter, firstValueFrom } from "rxjs";
import {
  ConnectionRefusedError,
  createNodeClient,
  type ErrorCode,
  RemoteError,
  type SessionEvent,
  type SessionmuxClientApi,
  SessionmuxError,
} from "@sessionmux/client/node";
import WebSocket from "ws";

class EchoAgent implements AgentDriver {
  readonly name = "echo";
  readonly defaultModel = "echo-1";
  models() {
    return [{ id: "echo-1", label: "Echo" }];
  }
  async runTurn(turn: TurnContext): Promise<TurnOutcome> {
    await turn.emit({ type: "assistant/delta", text: turn.prompt.text });
    return { state: "completed" };
  }
}

const principals = new Map<string, Principal>([["alice-token", { name: "alice", admin: false }]]);
const mux = await createSessionmux({
  db: process.argv[2]!,
  basePath: "/chat",
  agent: new EchoAgent(),
  authenticate: (req) => principals.get(bearerToken(req) ?? ""),
});
const server = createServer((_req, res) => res.end("app route"));
mux.attach(server);
server.listen(0, "127.0.0.1");
await once(server, "listening");
const { port } = server.address() as AddressInfo;
const url = "ws://127.0.0.1:" + port + "/chat/api/remote.mux";
const codeOf = (error: unknown): ErrorCode | "not a SessionmuxError" =>
  error instanceof SessionmuxError ? error.code : "not a SessionmuxError";
const out: Record<string, unknown> = {};
out.app = await (await fetch("http://127.0.0.1:" + port + "/elsewhere")).text();

const client = createNodeClient({ url, token: "alice-token" });
const { header } = await client.create({ title: "packed" });
await client.prompt({ sessionId: header.sessionId, text: "hi" });
const seen: SessionEvent["type"][] = [];
for await (const update of client.follow(header.sessionId)) {
  if (update.kind !== "events") continue;
  seen.push(...update.events.map((event) => event.type));
  if (update.events.some((event) => event.type === "turn/end")) break;
}
out.seen = seen;
out.aborted = await client.call("session.list", {}, { signal: AbortSignal.abort() }).then(() => "answered", codeOf);
out.missing = await client
  .call("session.page", { sessionId: "nope" })
  .then(() => "answered", (error: unknown) => (error instanceof RemoteError ? codeOf(error) : "not a RemoteError"));
await client.close();

// a browser's client sends its token as the bearer. subprotocol, which bearerToken reads too
const browserStyle = createClient({ url, token: "alice-token", WebSocket });
out.browserStyle = (await browserStyle.call("session.list", {})).sessions.length;
await browserStyle.close();

const refused = createNodeClient({ url, token: "wrong" });
out.refused = await refused
  .call("session.list", {})
  .then(() => "answered", (error: unknown) => (error instanceof ConnectionRefusedError ? codeOf(error) : "not refused"));
await refused.close();

const inProcess = mux.connect({ name: "scheduler", admin: false });
// code written for either package's client takes the other's: each declares the class apart
const countOf = async (any: SessionmuxClientApi) => (await any.list()).sessions.length;
const countOnHost = async (any: HostClientApi) => (await any.list()).sessions.length;
const anotherClient = createNodeClient({ url, token: "alice-token" });
out.shared = [await countOf(inProcess), await countOnHost(anotherClient)];
await anotherClient.close();
// the client package's Observables take the host's in-process client, and any SessionmuxClientApi
const own = (await inProcess.create({ title: "in process" })).header.sessionId;
const followed = await firstValueFrom(followSession(inProcess, own).pipe(filter((update) => update.kind === "caughtUp")));
const viaApi: SessionmuxClientApi = inProcess;
const mirror = await firstValueFrom(controlMirror(viaApi).pipe(filter((m) => m.generation !== undefined)));
out.observables = [followed.kind, mirror.stale];
out.inProcess = await inProcess
  .call("session.page", { sessionId: "nope" })
  .then(() => "answered", (error: unknown) => (error instanceof HostRemoteError ? error.code : "not a RemoteError"));
await inProcess.close();

await mux.close();
server.close();
process.stdout.write(JSON.stringify(out));
`;
