/**
 * The listen queue every server of the benchmark gets, the host's own (src/server.ts): with Node's
 * default of 511, a storm of 1,000 simultaneous connects loses SYNs and the figure becomes the
 * kernel's 1 s SYN retransmit timer instead of the server's work.
 */
export const LISTEN_BACKLOG = 4096;

/** `ws` server options on 127.0.0.1, a free port, no compression, the shared listen queue. */
export const wsServerOptions = {
  host: "127.0.0.1",
  port: 0,
  backlog: LISTEN_BACKLOG,
  perMessageDeflate: false,
} as const;
