import { readFileSync } from "node:fs";

/**
 * The kernel's timer on the IPv4 TCP connection from local port `port` to `remotePort`, as
 * `/proc/net/tcp` shows it: `02` is the keepalive timer, `00` none (an idle socket without it).
 */
export function tcpTimer(port: number, remotePort: number): string | undefined {
  const hex = (n: number) => n.toString(16).toUpperCase().padStart(4, "0");
  for (const line of readFileSync("/proc/net/tcp", "utf8").split("\n").slice(1)) {
    const [, local, remote, , , timer] = line.trim().split(/\s+/);
    if (local?.endsWith(`:${hex(port)}`) && remote?.endsWith(`:${hex(remotePort)}`))
      return timer?.split(":")[0];
  }
  return undefined;
}
