import { readdirSync, readFileSync, readlinkSync } from "node:fs";

/**
 * The local TCP ports of a process's connections to `pgPort` (Linux /proc): what PostgreSQL shows
 * as `client_port` in `pg_stat_activity`, so a test can tell one host's sessions from the others'.
 */
export function pgClientPorts(pid: number, pgPort = 5432): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match) inodes.add(match[1]!);
    } catch {
      // closed while we looked
    }
  }
  const ports: number[] = [];
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    for (const line of readFileSync(table, "utf8").split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      const [local, remote, inode] = [fields[1], fields[2], fields[9]];
      if (!local || !remote || !inode || !inodes.has(inode)) continue;
      if (Number.parseInt(remote.split(":")[1]!, 16) === pgPort)
        ports.push(Number.parseInt(local.split(":")[1]!, 16));
    }
  }
  return ports;
}
