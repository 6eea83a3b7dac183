/**
 * One progress line on stderr, rewritten in place on a terminal, appended otherwise. No total:
 * a round repeats its runs until enough CPU is spent, so the count is known only at the end.
 */
export class Progress {
  private readonly started = Date.now();
  private step = 0;

  next(label: string): void {
    this.step += 1;
    const elapsed = ((Date.now() - this.started) / 1000).toFixed(0);
    const line = `[${this.step}] ${elapsed}s ${label}`;
    if (process.stderr.isTTY) process.stderr.write(`\r\x1b[2K${line}`);
    else process.stderr.write(`${line}\n`);
  }

  done(): void {
    if (process.stderr.isTTY) process.stderr.write("\n");
  }
}
