/**
 * How many turns of the event loop other work got while `work` ran: a check that a long job
 * yields (and how often), counted by a callback that re-arms itself with `setImmediate`.
 */
export async function loopTurnsDuring(work: () => Promise<unknown>): Promise<number> {
  let turns = 0;
  let running = true;
  const other = () => {
    turns++;
    if (running) setImmediate(other);
  };
  setImmediate(other);
  try {
    await work();
  } finally {
    running = false;
  }
  return turns;
}
