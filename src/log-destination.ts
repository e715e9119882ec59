import { pino } from 'pino';

type SonicBoom = ReturnType<typeof pino.destination>;

/**
 * pino's destination for the agent's log: lines are gathered as they come and
 * handed to sonic-boom (which writes them to stdout asynchronously) joined,
 * `batchChars` at a time or `flushMs` after the first line waiting. Handed one
 * line at a time, sonic-boom measures the UTF-8 length of every line and of the
 * text already waiting (Buffer.byteLength of a freshly concatenated string):
 * half of what a request's log line cost the agent, measured under load.
 * Lines still waiting at exit are written synchronously.
 */
export class BatchedLines {
  private lines: string[] = [];
  private chars = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly boom: SonicBoom;

  constructor(
    fd: number,
    private readonly batchChars: number,
    private readonly flushMs: number,
  ) {
    this.boom = pino.destination({ dest: fd, sync: false });
    process.on('exit', () => this.flushSync());
  }

  write(line: string): void {
    this.lines.push(line);
    this.chars += line.length;
    if (this.chars >= this.batchChars) this.pass();
    else this.timer ??= setTimeout(() => this.pass(), this.flushMs).unref();
  }

  /** Writes what waits now (pino's `logger.flush()`). */
  flush(done?: (err?: Error) => void): void {
    this.pass();
    this.boom.flush(done);
  }

  flushSync(): void {
    this.pass();
    this.boom.flushSync();
  }

  private pass(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.lines.length === 0) return;
    this.boom.write(this.lines.join(''));
    this.lines = [];
    this.chars = 0;
  }
}
