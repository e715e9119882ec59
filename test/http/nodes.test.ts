import test from 'ava';
import { agentFor } from '../helpers/agent.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { MemoryDriver } from '../helpers/memory-driver.js';

// The fleet's nodes (docs/api.md §17) as one agent over SQLite answers them: a fleet of one, the platform's alone.
test("one agent is a fleet of one: its node alive, its bots counted; every status and the console's fleet name it", async (t) => {
  const driver = new MemoryDriver();
  driver.add({ id: 'bot_1_1_a', address: '127.0.0.7' });
  driver.add({ id: 'bot_2_2_b', address: '127.0.0.8' }).running = false;
  const server = await agentFor(t, driver, { node: 'host-1' });
  let reply = await call(server, '/api/admin/nodes');
  t.true(await eventually(async () => {
    reply = await call(server, '/api/admin/nodes');
    return (reply.body?.nodes as unknown[] | undefined)?.length === 1;
  }), reply.text);
  t.like(reply.body, { ok: true, node: 'host-1' });
  t.like((reply.body?.nodes as unknown[])[0], { node: 'host-1', url: null, alive: true, bots: 2, running: 1, self: true });
  t.like((await call(server, '/api/bots/bot_1_1_a')).body?.bot, { node: 'host-1' });
  t.deepEqual(((await call(server, '/api/console/fleet')).body?.bots as { node: string }[]).map((bot) => bot.node), ['host-1', 'host-1']);
});

test("a bot may not list the fleet's nodes", async (t) => {
  const driver = new MemoryDriver();
  driver.add({ id: 'bot_1_1_a', address: '127.0.0.7' });
  const server = await agentFor(t, driver);
  const reply = await call(server, '/api/admin/nodes', { from: '127.0.0.7' });
  t.is(reply.status, 403);
  t.regex(String(reply.body?.msg), /only the platform .* may list or drain the fleet's nodes/);
});
