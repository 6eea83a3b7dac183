import { once } from "node:events";
import { statSync } from "node:fs";
import { createServer } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { createNodeClient } from "../../src/client/node.js";
import { SCHEMA_VERSION } from "../../src/store/migrations.js";
import { tempDir } from "../support/temp-dir.js";
import { runCli, startServe } from "./run-cli.js";

const dirs: { remove(): void }[] = [];
const stops: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
  for (const dir of dirs.splice(0)) dir.remove();
});

function folder() {
  const dir = tempDir();
  dirs.push(dir);
  return dir;
}

/** `serve` configured through the environment only, on a free port. */
async function serve(env: Record<string, string>, args: string[] = []) {
  const started = await startServe(args, { SESSIONMUX_HOST: "127.0.0.1", SESSIONMUX_PORT: "0", ...env });
  if (started.exited !== undefined) throw new Error(`serve exited ${started.exited}: ${started.stderr}`);
  stops.push(started.stop);
  const url = /listening on (\S+)/.exec(started.stdout)?.[1];
  if (!url) throw new Error(`no URL in ${started.stdout}`);
  return { ...started, url, token: /#token=([A-Za-z0-9_-]+)/.exec(started.stdout)?.[1] };
}

describe("sessionmux serve: operations", () => {
  it("keeps one admin token in the data folder across restarts until it is rotated", async () => {
    const dir = folder();
    const env = { SESSIONMUX_DB: dir.file("sessions.db") };
    const first = await serve(env);
    expect(first.token).toBeDefined();
    expect(first.stdout).toContain(dir.file("sessionmux.token"));
    expect(statSync(dir.file("sessionmux.token")).mode & 0o777).toBe(0o600);
    const ok = await fetch(`${first.url}/api/chat/sessions`, {
      headers: { authorization: `Bearer ${first.token}` },
    });
    expect(ok.status).toBe(200);
    expect(
      (await fetch(`${first.url}/api/chat/sessions`, { headers: { authorization: "Bearer wrong" } })).status,
    ).toBe(401);
    const logs = await first.stop();
    stops.pop();
    expect(logs).toContain('"msg":"request refused"');
    expect(logs).toContain('"msg":"shutdown complete"');

    const second = await serve(env);
    expect(second.token).toBe(first.token);
    const list = (token: string | undefined) =>
      fetch(`${second.url}/api/chat/sessions`, { headers: { authorization: `Bearer ${token}` } });
    expect((await list(first.token)).status).toBe(200);

    // rotated while the host runs: the old token is refused at once, the new one works
    const rotated = await runCli(["token", "rotate"], env);
    expect(rotated.code).toBe(0);
    const fresh = rotated.stdout.trim();
    expect(fresh).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(fresh).not.toBe(first.token);
    expect(statSync(dir.file("sessionmux.token")).mode & 0o777).toBe(0o600);
    expect((await list(first.token)).status).toBe(401);
    expect((await list(fresh)).status).toBe(200);
    const client = createNodeClient({
      url: `${second.url.replace("http", "ws")}/api/remote.mux`,
      token: fresh,
    });
    stops.push(() => client.close());
    expect((await client.list()).sessions).toEqual([]);
    await second.stop();
    stops.splice(stops.indexOf(second.stop), 1);

    const third = await serve(env);
    expect(third.token).toBe(fresh);
  });

  it("honours SESSIONMUX_TOKEN, answers /healthz, /readyz and process metrics", async () => {
    const dir = folder();
    const host = await serve({ SESSIONMUX_DB: dir.file("sessions.db"), SESSIONMUX_TOKEN: "from-env" });
    expect(host.token).toBeUndefined();
    expect((await fetch(`${host.url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${host.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ ready: true });
    const metrics = await fetch(`${host.url}/metrics`, { headers: { authorization: "Bearer from-env" } });
    const text = await metrics.text();
    expect(text).toContain("process_cpu_user_seconds_total");
    expect(text).toContain("nodejs_eventloop_lag_seconds");
    expect(text).toContain('sessionmux_http_request_seconds_count{route="GET /readyz"} 1');
  });

  it("refuses a database folder that does not exist, naming it, unless asked to create it", async () => {
    const dir = folder();
    const db = dir.file("typo/sessions.db");
    const refused = await startServe(["--db", db], { SESSIONMUX_PORT: "0" });
    expect(refused.exited).toBe(2);
    expect(refused.stderr).toContain("db_folder_missing");
    expect(refused.stderr).toContain(dir.file("typo"));
    const created = await serve({ SESSIONMUX_DB: db, SESSIONMUX_CREATE_DB_FOLDER: "1" });
    expect(created.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  it("names the port that is already in use", async () => {
    const dir = folder();
    const squatter = createServer().listen(0, "127.0.0.1");
    await once(squatter, "listening");
    stops.push(() => new Promise((resolve) => squatter.close(resolve)));
    const port = (squatter.address() as { port: number }).port;
    const refused = await startServe([], {
      SESSIONMUX_DB: dir.file("sessions.db"),
      SESSIONMUX_PORT: String(port),
      SESSIONMUX_TOKEN: "t",
    });
    expect(refused.exited).toBe(2);
    expect(refused.stderr).toContain("address_in_use");
    expect(refused.stderr).toContain(`port ${port} on 127.0.0.1`);
  });

  it("migrate refuses a database a running host has open db_in_use, as rebuild-projections does", async () => {
    const dir = folder();
    const env = { SESSIONMUX_DB: dir.file("sessions.db"), SESSIONMUX_TOKEN: "t" };
    const host = await serve(env);
    const refused = await runCli(["migrate"], env);
    const rebuild = await runCli(["rebuild-projections"], env);
    expect(refused.code).toBe(2);
    expect(refused.code).toBe(rebuild.code);
    expect(refused.stderr).toContain("error: db_in_use: ");
    expect(refused.stderr).toContain(dir.file("sessions.db"));
    expect(refused.stdout).toBe("");
    await host.stop();
    stops.pop();
    const migrated = await runCli(["migrate"], env);
    expect(migrated.code).toBe(0);
    expect(JSON.parse(migrated.stdout)).toMatchObject({ from: SCHEMA_VERSION, to: SCHEMA_VERSION });
  });

  it("a second serve on a file a running host has open is refused db_in_use, as migrate is", async () => {
    const dir = folder();
    const env = { SESSIONMUX_DB: dir.file("sessions.db"), SESSIONMUX_TOKEN: "t" };
    const host = await serve(env);
    const second = await startServe([], { SESSIONMUX_HOST: "127.0.0.1", SESSIONMUX_PORT: "0", ...env });
    const migrate = await runCli(["migrate"], env);
    expect(second.exited).toBe(2);
    expect(second.exited).toBe(migrate.code);
    expect(second.stderr).toContain("error: db_in_use: ");
    expect(second.stderr).toContain(dir.file("sessions.db"));
    expect(second.stdout).not.toContain("listening on");
    await host.stop();
    stops.pop();
    await serve(env);
  });

  it("rebuild-projections refuses a database a running host has open, and a missing one", async () => {
    const dir = folder();
    const env = { SESSIONMUX_DB: dir.file("sessions.db"), SESSIONMUX_TOKEN: "t" };
    const host = await serve(env);
    const refused = await runCli(["rebuild-projections"], env);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("db_in_use");
    expect(refused.stderr).toContain(dir.file("sessions.db"));
    await host.stop();
    stops.pop();
    const rebuilt = await runCli(["rebuild-projections"], env);
    expect(rebuilt.stdout).toContain("projections rebuilt");

    const missing = await runCli(["rebuild-projections", "--db", dir.file("other.db")]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("db_missing");
    expect(statSync(dir.path).isDirectory()).toBe(true);
    expect(() => statSync(dir.file("other.db"))).toThrow();
  });
});
