import { cpus, platform, release, totalmem } from "node:os";

export interface MachineDescription {
  cpuModel: string;
  cores: number;
  memoryBytes: number;
  node: string;
  platform: string;
}

/** What the figures were measured on: every result file and table carries it. */
export function describeMachine(): MachineDescription {
  const list = cpus();
  return {
    cpuModel: list[0]?.model.trim() ?? "unknown",
    cores: list.length,
    memoryBytes: totalmem(),
    node: process.version,
    platform: `${platform()} ${release()}`,
  };
}

export function formatMachine(machine: MachineDescription): string {
  const gib = (machine.memoryBytes / 2 ** 30).toFixed(1);
  return `${machine.cpuModel}, ${machine.cores} cores, ${gib} GiB, Node ${machine.node}, ${machine.platform}`;
}
