/**
 * A host in its own process, so a test can SIGKILL it like a crash and start it again on the same
 * database and port. Usage: `node --import tsx test/web/host-process.ts <port> <dbPath> <token> <webRoot>`.
 * Prints `ready <port>` once it listens.
 */
import { startHost } from "../../src/server.js";

const [port, dbPath, token, webRoot] = process.argv.slice(2);
if (!port || !dbPath || !token || !webRoot) {
  process.stderr.write("usage: host-process.ts <port> <dbPath> <token> <webRoot>\n");
  process.exit(2);
}
const running = await startHost({
  host: "127.0.0.1",
  port: Number(port),
  dbPath,
  tokens: [{ name: "admin", secret: token, admin: true }],
  http: { webRoot },
});
process.stdout.write(`ready ${running.port}\n`);
process.on("SIGTERM", () => void running.close().then(() => process.exit(0)));
