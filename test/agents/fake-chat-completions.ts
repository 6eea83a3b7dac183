import { once } from "node:events";
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** One request the fake endpoint received, its JSON body parsed. */
export interface ChatRequest {
  headers: IncomingHttpHeaders;
  body: {
    model: string;
    stream: boolean;
    messages: Record<string, unknown>[];
    tools?: { type: string; function: { name: string; description?: string; parameters: unknown } }[];
  };
}

/** How the endpoint answers one request. */
export type Reply = (res: ServerResponse, request: ChatRequest) => unknown;

export interface ScriptedCall {
  id: string;
  name: string;
  args: unknown;
}

/**
 * A real HTTP server on 127.0.0.1 speaking the streaming chat-completions dialect. Each request
 * takes the next scripted reply; one with none left is answered 500, so a test that makes the
 * agent call once more than it planned fails with a clear error instead of hanging.
 */
export class FakeChatCompletions {
  readonly requests: ChatRequest[] = [];
  readonly #replies: Reply[] = [];
  readonly #server: Server;
  baseURL = "";

  private constructor() {
    this.#server = createServer(async (req, res) => {
      const parts: Buffer[] = [];
      for await (const part of req) parts.push(part as Buffer);
      if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
        res.writeHead(404).end();
        return;
      }
      const request = { headers: req.headers, body: JSON.parse(Buffer.concat(parts).toString("utf8")) };
      this.requests.push(request);
      const reply = this.#replies.shift();
      if (!reply) {
        res.writeHead(500, { "content-type": "application/json" }).end('{"error":"no scripted reply left"}');
        return;
      }
      await reply(res, request);
    });
  }

  static async start(): Promise<FakeChatCompletions> {
    const fake = new FakeChatCompletions();
    fake.#server.listen(0, "127.0.0.1");
    await once(fake.#server, "listening");
    fake.baseURL = `http://127.0.0.1:${(fake.#server.address() as AddressInfo).port}/v1`;
    return fake;
  }

  /** Queues replies, answered in order. */
  script(...replies: Reply[]): void {
    this.#replies.push(...replies);
  }

  get unanswered(): number {
    return this.#replies.length;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

let chunkId = 0;

/** A `chat.completion.chunk` with one choice. */
export function chunk(delta: object, finishReason: string | null = null): object {
  return {
    id: `chatcmpl-${++chunkId}`,
    object: "chat.completion.chunk",
    created: 1_700_000_000,
    model: "fake-model",
    choices: [{ index: 0, delta, finish_reason: finishReason }],
  };
}

/** Streams the chunks as server-sent events, then `[DONE]`. */
export function streamed(chunks: object[]): Reply {
  return (res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    for (const c of chunks) res.write(`data: ${JSON.stringify(c)}\n\n`);
    res.end("data: [DONE]\n\n");
  };
}

/** Text in the given pieces, then `stop`. */
export function textReply(...pieces: string[]): Reply {
  return streamed([
    chunk({ role: "assistant", content: "" }),
    ...pieces.map((content) => chunk({ content })),
    chunk({}, "stop"),
  ]);
}

/**
 * Optional text, then tool calls whose arguments arrive in two pieces each, interleaved the way
 * OpenAI streams parallel calls (by `index`), then `tool_calls`.
 */
export function toolCallReply(text: string, calls: ScriptedCall[]): Reply {
  const chunks: object[] = [chunk({ role: "assistant", content: text })];
  const halves = calls.map((c) => {
    const json = JSON.stringify(c.args);
    return [json.slice(0, Math.ceil(json.length / 2)), json.slice(Math.ceil(json.length / 2))] as const;
  });
  calls.forEach((c, index) => {
    chunks.push(
      chunk({
        tool_calls: [
          { index, id: c.id, type: "function", function: { name: c.name, arguments: halves[index]![0] } },
        ],
      }),
    );
  });
  calls.forEach((_, index) => {
    chunks.push(chunk({ tool_calls: [{ index, function: { arguments: halves[index]![1] } }] }));
  });
  chunks.push(chunk({}, "tool_calls"));
  return streamed(chunks);
}
