import { type Logger, pino } from "pino";

/**
 * The logger of a host given none: warnings and errors as pino JSON lines on stderr, as `serve`
 * writes them. Disabled, an agent that threw or a shutdown step that failed reached the app only
 * as a `turn/end` marked failed, with nothing to say why. Written synchronously: these lines are
 * few, and one written just before the process exits is not lost.
 */
export function defaultLogger(): Logger {
  return pino({ level: "warn", base: { app: "sessionmux" } }, pino.destination({ fd: 2, sync: true }));
}
