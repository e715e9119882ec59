/** Which of the bot's outputs a piece of log text came from. */
export type OutputStream = 'stdout' | 'stderr';

const HEADER_BYTES = 8;

/**
 * Takes apart the engine's multiplexed log stream of a container without a
 * TTY: frames of an 8-byte header (stream type, three zero bytes, a 32-bit
 * length) and their payload. A loop over each chunk, handing on slices of it,
 * so that any number of frames costs no recursion and no copying. (docker-modem's
 * demuxStream recurses once a frame and copies what is left each time: a few
 * thousand log lines overflow the stack.) Bytes that cannot be a header mean
 * the stream is not framed; the rest is handed on as stdout.
 */
export class DockerLogDemuxer {
  private readonly header = Buffer.alloc(HEADER_BYTES);
  private headerFilled = 0;
  private remaining = 0;
  private stream: OutputStream = 'stdout';
  private unframed = false;
  /** How many frames began so far: one for each log entry the engine sent. */
  frames = 0;

  /** `emit` gets each piece of a frame's payload; `first` says it begins a frame (a log entry). */
  constructor(private readonly emit: (stream: OutputStream, bytes: Buffer, first: boolean) => void) {}

  /** Whether the next payload bytes begin a frame. */
  private atFrameStart = false;

  push(chunk: Buffer): void {
    let offset = 0;
    while (offset < chunk.length) {
      if (this.unframed) {
        this.emit('stdout', chunk.subarray(offset), false);
        return;
      }
      if (this.remaining > 0) {
        const take = Math.min(this.remaining, chunk.length - offset);
        this.emit(this.stream, chunk.subarray(offset, offset + take), this.atFrameStart);
        this.atFrameStart = false;
        this.remaining -= take;
        offset += take;
        continue;
      }
      const take = Math.min(HEADER_BYTES - this.headerFilled, chunk.length - offset);
      chunk.copy(this.header, this.headerFilled, offset, offset + take);
      this.headerFilled += take;
      offset += take;
      if (this.headerFilled === HEADER_BYTES) this.readHeader();
    }
  }

  private readHeader(): void {
    this.headerFilled = 0;
    const type = this.header[0] ?? 0;
    if (type > 2 || this.header[1] !== 0 || this.header[2] !== 0 || this.header[3] !== 0) {
      this.unframed = true;
      this.emit('stdout', Buffer.from(this.header), true);
      return;
    }
    this.frames += 1;
    this.stream = type === 2 ? 'stderr' : 'stdout';
    this.remaining = this.header.readUInt32BE(4);
    this.atFrameStart = true;
  }
}

/** The payloads of a whole framed buffer, in order, as one buffer. */
export function demuxed(raw: Buffer): Buffer {
  const pieces: Buffer[] = [];
  new DockerLogDemuxer((_stream, bytes) => pieces.push(bytes)).push(raw);
  return Buffer.concat(pieces);
}
