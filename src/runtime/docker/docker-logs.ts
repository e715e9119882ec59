import { Readable, Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import type Docker from 'dockerode';

/**
 * Plain text from the Buffer that a non-following logs call returns. Without
 * a TTY the engine frames each chunk with a stream header; docker-modem
 * removes them, writing stdout and stderr into one sink so that the two stay
 * in the order the engine stored them.
 */
export async function logText(docker: Docker, raw: Buffer, tty: boolean): Promise<string> {
  if (tty) return raw.toString('utf8').replace(/\r\n/g, '\n');
  const chunks: Buffer[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk);
      done();
    },
  });
  const source = Readable.from([raw]);
  docker.modem.demuxStream(source, sink, sink);
  await finished(source);
  return Buffer.concat(chunks).toString('utf8');
}
