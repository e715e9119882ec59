import test from 'ava';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { SocketProxy } from '../helpers/socket-proxy.js';

/** What a client of the proxy receives from an upstream that writes `pieces` one at a time, apart. */
async function receivedThroughProxy(hold: (proxy: SocketProxy) => void, pieces: string[]): Promise<string> {
  const path = join(tmpdir(), `upstream-${process.pid}-${Math.random().toString(36).slice(2)}.sock`);
  const upstream = createServer(async (socket) => {
    for (const piece of pieces) {
      socket.write(piece);
      await sleep(50);
    }
    socket.end();
  });
  upstream.listen(path);
  await once(upstream, 'listening');
  const proxy = new SocketProxy(path);
  await proxy.start();
  hold(proxy);
  try {
    const client = connect(proxy.path);
    let received = '';
    client.on('data', (chunk: Buffer) => (received += chunk.toString()));
    await once(client, 'close');
    return received;
  } finally {
    await proxy.close();
    upstream.close();
    rmSync(path, { force: true });
  }
}

const holdOomUntilDie = (proxy: SocketProxy) => proxy.holdAnswers(['oom'], ['die']);

test('a piece held until another is passed back after it', async (t) => {
  t.is(await receivedThroughProxy(holdOomUntilDie, ['oom;', 'die;', 'start;']), 'die;oom;start;');
});

// An engine that already sends the two the other way round (the exits test's late oom, on a loaded machine):
// the later piece must not wait for an `until` that has gone by.
test('a piece whose `until` has already passed on its connection is passed back at once', async (t) => {
  t.is(await receivedThroughProxy(holdOomUntilDie, ['die;', 'oom;', 'start;']), 'die;oom;start;');
});
