import { type Command, InvalidArgumentError, Option } from "commander";
import { Limits } from "../../protocol/index.js";
import type { MuxOptions } from "../transport/mux/mux-server.js";

/** One limit of the host a flag (or its environment variable) can change. */
interface LimitFlag {
  readonly flag: string;
  readonly env: string;
  readonly description: string;
  readonly fallback: number;
  readonly min: number;
}

/** Every limit of docs/reliability.md "Limits", with the flag and variable that change it. */
const MUX_FLAGS = {
  sendHighWaterBytes: {
    flag: "--send-high-water-bytes <n>",
    env: "SESSIONMUX_SEND_HIGH_WATER_BYTES",
    description: "unsent bytes on a socket above which the host stops reading it",
    fallback: Limits.sendHighWaterBytes,
    min: 1024,
  },
  maxCallsInFlight: {
    flag: "--max-calls-in-flight <n>",
    env: "SESSIONMUX_MAX_CALLS_IN_FLIGHT",
    description: "calls running at once per socket",
    fallback: Limits.maxCallsInFlight,
    min: 1,
  },
  maxQueuedCalls: {
    flag: "--max-queued-calls <n>",
    env: "SESSIONMUX_MAX_QUEUED_CALLS",
    description: "calls waiting per socket before one is answered overloaded",
    fallback: Limits.maxQueuedCalls,
    min: 0,
  },
  maxStreamsPerSocket: {
    flag: "--max-streams-per-socket <n>",
    env: "SESSIONMUX_MAX_STREAMS_PER_SOCKET",
    description: "open streams per socket",
    fallback: Limits.maxStreamsPerSocket,
    min: 1,
  },
} as const satisfies Partial<Record<keyof MuxOptions, LimitFlag>>;

type MuxLimitName = keyof typeof MUX_FLAGS;

export type LimitValues = Record<MuxLimitName, number>;

const integer = (flag: string, min: number) => (value: string) => {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < min)
    throw new InvalidArgumentError(`${flag.split(" ")[0]} must be an integer ≥ ${min}`);
  return n;
};

export function addLimitOptions(command: Command): Command {
  for (const spec of Object.values(MUX_FLAGS) as LimitFlag[]) {
    command.addOption(
      new Option(spec.flag, spec.description)
        .env(spec.env)
        .argParser(integer(spec.flag, spec.min))
        .default(spec.fallback),
    );
  }
  return command;
}

/** The mux options the limit flags set. */
export function muxLimitsOf(values: LimitValues): Partial<MuxOptions> {
  return {
    sendHighWaterBytes: values.sendHighWaterBytes,
    maxCallsInFlight: values.maxCallsInFlight,
    maxQueuedCalls: values.maxQueuedCalls,
    maxStreamsPerSocket: values.maxStreamsPerSocket,
  };
}
