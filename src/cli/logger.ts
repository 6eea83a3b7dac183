import { type Logger, pino } from "pino";

/** Structured logs go to stderr so stdout stays free for command output (JSON lines, URLs). */
export function createLogger(level: string): Logger {
  return pino({ level, base: { app: "sessionmux" } }, pino.destination({ fd: 2, sync: false }));
}
