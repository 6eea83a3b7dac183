/** Yields the payload of every `data:` line of a server-sent-events body, until `[DONE]` or the end. */
export async function* sseData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let newline = buffer.indexOf("\n");
      while (newline >= 0) {
        const line = buffer.slice(0, newline).replace(/\r$/, "");
        buffer = buffer.slice(newline + 1);
        if (line.startsWith("data:")) {
          const data = line.slice(5).trimStart();
          if (data === "[DONE]") return;
          yield data;
        }
        newline = buffer.indexOf("\n");
      }
      if (done) {
        const rest = buffer.trim();
        if (rest.startsWith("data:") && rest.slice(5).trim() !== "[DONE]") yield rest.slice(5).trimStart();
        return;
      }
    }
  } finally {
    reader.releaseLock();
  }
}
