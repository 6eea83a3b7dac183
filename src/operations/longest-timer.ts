/**
 * The longest delay a Node timer waits, in ms (2^31 − 1, about 24.8 days): a longer one fires
 * after 1 ms, with only a TimeoutOverflowWarning. An interval or a wait an operator sets is
 * refused past it, or a ping interval of 30 days (to all but switch pings off) pinged every
 * millisecond and an idle agent of a 30-day detach went at once. One figure for host and client.
 */
export { LONGEST_TIMER_MS } from "../client/long-timeout.js";
