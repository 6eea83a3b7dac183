import { DurableStream, IdempotentProducer, stream } from "@durable-streams/client";
import { DurableStreamTestServer } from "@durable-streams/server";
import { tempFolder } from "../harness/temp-folder.js";
import type { DeltaEvent } from "../harness/workload.js";

const originalInfo = console.info;

/**
 * The reference server logs every append slower than a few ms with a synchronous `console.info`,
 * which would flood the report and slow the peer down; its info lines are dropped while it runs.
 */
function quietInfoLog(): void {
  console.info = (...args: unknown[]) => {
    if (typeof args[0] === "string" && args[0].startsWith("[info]")) return;
    originalInfo(...args);
  };
}

/**
 * The Durable Streams reference server, file-backed (it fsyncs every append), driven through its
 * own client: one JSON stream per session, one JSON message per event.
 */
export class DurableStreamsPeer {
  private constructor(
    private readonly server: DurableStreamTestServer,
    private readonly folder: { remove(): void },
  ) {}

  /** A server on 127.0.0.1 with its files in a fresh folder, removed on close. */
  static async start(): Promise<DurableStreamsPeer> {
    quietInfoLog();
    const folder = tempFolder("durable-streams");
    const server = new DurableStreamTestServer({
      port: 0,
      host: "127.0.0.1",
      dataDir: folder.path,
      compression: false,
    });
    await server.start();
    return new DurableStreamsPeer(server, folder);
  }

  url(sessionId: string): string {
    return `${this.server.url}/v1/stream/${sessionId}`;
  }

  async create(sessionId: string): Promise<DurableStream> {
    return DurableStream.create({
      url: this.url(sessionId),
      contentType: "application/json",
      warnOnHttp: false,
    });
  }

  /** One awaited append per event: the acknowledged-append job sessionmux does per event. */
  async appendOne(handle: DurableStream, event: DeltaEvent): Promise<void> {
    await handle.append(JSON.stringify(event));
  }

  /** Setup only: fills a stream fast with the client's batching producer. */
  async fill(handle: DurableStream, events: Iterable<DeltaEvent>): Promise<void> {
    const producer = new IdempotentProducer(handle, "bench-fill", { autoClaim: true, lingerMs: 2 });
    for (const event of events) producer.append(JSON.stringify(event));
    await producer.flush();
    await producer.close();
  }

  /** Catch-up read of the whole stream from its start; resolves with the number of items read. */
  async readAll(sessionId: string): Promise<number> {
    const response = await stream<DeltaEvent>({
      url: this.url(sessionId),
      offset: "-1",
      live: false,
      warnOnHttp: false,
    });
    const items = await response.json();
    return items.length;
  }

  async close(): Promise<void> {
    await this.server.stop();
    this.folder.remove();
    console.info = originalInfo;
  }
}
