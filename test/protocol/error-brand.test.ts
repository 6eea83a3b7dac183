import { describe, expect, it, vi } from "vitest";

type ClientModule = typeof import("../../src/client/index.js");

/** Two evaluations of the module graph: what two packages that each carry the classes give an app. */
async function twoCopies(): Promise<[ClientModule, ClientModule]> {
  vi.resetModules();
  const first = (await import("../../src/client/index.js")) as ClientModule;
  vi.resetModules();
  const second = (await import("../../src/client/index.js")) as ClientModule;
  return [first, second];
}

describe("error classes across copies of the package", () => {
  it("holds instanceof against the other copy's class of the same name", async () => {
    const [a, b] = await twoCopies();
    expect(a.SessionmuxError).not.toBe(b.SessionmuxError);
    const remote = new a.RemoteError("not_found", "no such session");
    expect(remote instanceof b.RemoteError).toBe(true);
    expect(remote instanceof b.SessionmuxError).toBe(true);
    const refused = new b.ConnectionRefusedError(401, "ws://127.0.0.1:1/api/remote.mux");
    expect(refused instanceof a.ConnectionRefusedError).toBe(true);
    expect(refused instanceof a.RemoteError).toBe(true);
    expect(refused instanceof a.SessionmuxError).toBe(true);
    expect(new a.SessionmuxError("timeout", "late") instanceof b.SessionmuxError).toBe(true);
    expect(new b.RemoteStreamCarrierError("socket_lost") instanceof a.RemoteStreamCarrierError).toBe(true);
    expect(b.shouldRetry(new a.RemoteStreamCarrierError("socket_lost"))).toBe(true);
  });

  it("keeps the classes apart: a base is not its subclass, a carrier loss is not a host answer", async () => {
    const [a, b] = await twoCopies();
    expect(new a.SessionmuxError("timeout", "late") instanceof b.RemoteError).toBe(false);
    expect(new a.RemoteError("not_found", "gone") instanceof b.ConnectionRefusedError).toBe(false);
    expect(new a.RemoteStreamCarrierError("client_closed") instanceof b.SessionmuxError).toBe(false);
    expect(new Error("plain") instanceof b.SessionmuxError).toBe(false);
    expect(Object.assign(new Error("look-alike"), { code: "not_found" }) instanceof a.RemoteError).toBe(
      false,
    );
    for (const value of [null, undefined, "not_found", 42] as unknown[])
      expect((value as object) instanceof a.SessionmuxError).toBe(false);
  });

  it("leaves an application's own subclass to the ordinary check", async () => {
    const [a, b] = await twoCopies();
    class AppError extends a.SessionmuxError {}
    const app = new AppError("bad_request", "refused by the app");
    expect(app instanceof AppError).toBe(true);
    expect(app instanceof b.SessionmuxError).toBe(true);
    expect(new a.SessionmuxError("bad_request", "other") instanceof AppError).toBe(false);
    expect(new b.RemoteError("bad_request", "other") instanceof AppError).toBe(false);
  });
});
