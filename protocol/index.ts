/**
 * sessionmux wire contract v1 (protocol-v1.md) as types and runtime schemas.
 * Host and SDK import this module; it imports neither.
 */
export * from "./errors.js";
export * from "./events.js";
export * from "./frames.js";
export * from "./ids.js";
export * from "./limits.js";
export * from "./methods.js";
export * from "./readiness.js";
export * from "./rows.js";
export * from "./validate.js";
export * from "./visible-text.js";
