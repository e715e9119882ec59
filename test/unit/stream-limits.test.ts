import type { AddressInfo } from 'node:net';
import test from 'ava';
import Koa from 'koa';
import { TooManyRequests } from '../../src/errors.js';
import { listen } from '../../src/http/listen.js';
import { StreamLimits } from '../../src/http/stream-limits.js';
import { openStream } from '../helpers/sse-client.js';

// Streams opened through StreamLimits on a real server: of 4 places in all, the platform keeps 2 (bots' streams
// hold at most the rest), and per bot 3, whoever opened them.
test("bots' own streams hold at most all but the platform's places; the platform opens the rest, and a bot's place is free again once its stream ends", async (t) => {
  const limits = new StreamLimits(3, 4, 1024 * 1024, 2);
  const app = new Koa();
  // As the agent's app is: a stream the test closes while the server writes is no error worth a stack.
  app.silent = true;
  app.use(async (ctx) => {
    const botId = ctx.query.bot === undefined ? undefined : String(ctx.query.bot);
    try {
      limits.open(ctx, botId, ctx.query.by === 'bot');
    } catch (err) {
      if (!(err instanceof TooManyRequests)) throw err;
      ctx.status = 429;
      ctx.body = { ok: false, msg: err.message };
    }
  });
  const server = await listen(app, '127.0.0.1', 0);
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  const target = { port: (server.address() as AddressInfo).port };
  const open = (path: string) => openStream(target, path);
  const bots = [await open('/?bot=a&by=bot'), await open('/?bot=b&by=bot')];
  t.deepEqual(bots.map((stream) => stream.status), [200, 200]);
  const third = await open('/?bot=c&by=bot');
  t.is(third.status, 429);
  t.regex(String(third.body?.msg), /by bots .* the platform keeps 2/);
  const platform = [await open('/?bot=a'), await open('/')];
  t.deepEqual(platform.map((stream) => stream.status), [200, 200]);
  t.is((await open('/')).status, 429, 'all four taken');
  bots[0]?.close();
  platform[1]?.close();
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  t.is((await open('/?bot=c&by=bot')).status, 200);
  t.is(limits.count(), 3);
});
