import { Writable } from 'node:stream';

/** A destination for a pino logger that keeps every line it is given in `lines`, for a test to search. */
export function lineSink(lines: string[]): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
}
