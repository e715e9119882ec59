import { pino } from 'pino';

type SonicBoom = ReturnType<typeof pino.destination>;

const MASK = '***';
/** Shorter secrets are not masked: masking every "ab" would garble the log and hide nothing. */
const MIN_MASKED = 4;

/** A secret as a log line may hold it: as it is, escaped inside a JSON string, percent-encoded in a URL. */
function formsOf(secret: string): string[] {
  return [secret, JSON.stringify(secret).slice(1, -1), encodeURIComponent(secret)];
}

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
  private readonly masked: string[];

  /**
   * `secrets` (a token, a database password) are masked wherever they would
   * appear, as written, inside JSON or percent-encoded: whatever error text a
   * library hands the log, none reaches it.
   */
  constructor(
    fd: number,
    private readonly batchChars: number,
    private readonly flushMs: number,
    secrets: readonly (string | undefined)[] = [],
  ) {
    this.masked = [...new Set(secrets.filter((secret): secret is string => (secret?.length ?? 0) >= MIN_MASKED).flatMap(formsOf))];
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
    let text = this.lines.join('');
    for (const secret of this.masked) if (text.includes(secret)) text = text.replaceAll(secret, MASK);
    this.boom.write(text);
    this.lines = [];
    this.chars = 0;
  }
}
