import { once } from "node:events";
import { createServer } from "node:http";
import { connect } from "node:net";
import { describe, expect, it } from "vitest";
import { mountSessionmux } from "../../src/embed/mount-sessionmux.js";
import type { HostStore } from "../../src/store/live-state-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { gate } from "../support/gate.js";
import { tempDir } from "../support/temp-dir.js";
import { until } from "../support/until.js";
import { listen } from "./app-fixture.js";

const cleanups = cleanupsAfterEach();

/** The store, with each principal's stored-bytes figure (`GET /v1/usage`) held until `held` opens. */
function holdingUsage(held: Promise<void>) {
  return (store: HostStore): HostStore =>
    new Proxy(store, {
      get(target, property) {
        if (property === "ownerStoredBytes") {
          return async (owner: string) => {
            await held;
            return target.ownerStoredBytes(owner);
          };
        }
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
}

describe("a mounted host on an app's server, pipelined requests behind a slow one", () => {
  it("closes a connection past 256 requests waiting for their turn, which the app's server does not bound", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const slow = gate();
    cleanups.push(() => slow.open());
    const mux = await mountSessionmux(
      { db: dir.file("sessions.db"), tokens: [{ name: "admin", secret: "t", admin: true }] },
      { claimAll: false, storeView: holdingUsage(slow.promise) },
    );
    cleanups.push(() => mux.close());
    // the app's own server: none of the limits the host's own server sets
    const server = createServer();
    mux.attach(server);
    const authority = await listen(server);
    cleanups.push(() => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    });

    const [host, port] = authority.split(":") as [string, string];
    const open = async () => {
      const socket = connect(Number(port), host);
      cleanups.push(() => void socket.destroy());
      socket.on("error", () => {});
      await once(socket, "connect");
      return socket;
    };
    const request = `GET /v1/usage HTTP/1.1\r\nHost: ${authority}\r\nAuthorization: Bearer t\r\n\r\n`;
    // within the bound: every request is answered, in order, once the slow one is
    const patient = await open();
    let answers = "";
    patient.on("data", (chunk: Buffer) => {
      answers += chunk.toString("latin1");
    });
    patient.write(request.repeat(200));

    const socket = await open();
    let closed = false;
    socket.once("close", () => {
      closed = true;
    });
    // the first answer is slow and writes nothing meanwhile, so Node goes on parsing the rest:
    // each waited with its response and parsed head for as long as the peer cared to send more
    socket.write(request.repeat(600));
    await until(() => closed, 10_000, "the connection to be closed");
    expect(closed).toBe(true);

    expect(patient.destroyed).toBe(false);
    slow.open();
    const answered = () => answers.split("HTTP/1.1 200 OK").length - 1;
    await until(() => answered() === 200, 10_000, "200 answers on the patient connection");
    expect(answered()).toBe(200);
  });
});
