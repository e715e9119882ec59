import type { AddressInfo } from 'node:net';
import test from 'ava';
import pg from 'pg';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { webhookReceiver } from '../helpers/agent-process.js';
import { startAgent } from '../helpers/agent.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { dropDatabases, freshDatabase } from '../helpers/postgres.js';

// A bot that sends self-restarts as fast as 20 connections carry them for 30 s (all but two answered 429), to an agent
// whose history is a real PostgreSQL: the refusals cost no connection of the pool, so another bot's exit records,
// events and webhooks keep arriving and the platform's restarts answer 200 (docs/api.md §11).
const FLOOD_S = 30;
const SECRET = 'flood-secret';

const fixture = new DockerFixture();

test.after.always(async () => {
  await fixture.cleanup();
  await dropDatabases();
});

/** 20 connections, each sending 100 pipelined self-restarts at a time, until the unix time $3. */
const FLOODER = `
flood() {
  while [ "$(date +%s)" -lt "$3" ]; do
    i=0
    while [ $i -lt 100 ]; do printf 'POST /api/bots/self/restart HTTP/1.1\\r\\nHost: agent\\r\\nContent-Length: 0\\r\\n\\r\\n'; i=$((i + 1)); done \\
      | nc -w 1 "$1" "$2" >/dev/null 2>&1
  done
}
for worker in $(seq 20); do flood "$@" & done
wait
exec sleep 1000`;

test("a bot flooding its own restarts takes no one's database: another bot's records, events and webhooks arrive, the platform's restarts answer", async (t) => {
  await fixture.ready();
  const databaseUrl = await freshDatabase();
  const receiver = await webhookReceiver(0, SECRET);
  t.teardown(() => receiver.server.close());
  const agent = await startAgent(
    createDockerDriver({ dockerHost: fixture.dockerHost }),
    { databaseUrl, rateLimit: 2, webhook: { url: receiver.url, secret: SECRET }, recoverAfterMs: 3_600_000 },
    '0.0.0.0',
  );
  t.teardown(agent.close);
  const port = (agent.server.address() as AddressInfo).port;
  const watcher = new pg.Client({ connectionString: databaseUrl });
  await watcher.connect();
  t.teardown(() => watcher.end());

  const crasher = await fixture.runBot({ script: 'echo "run at $(date +%s)"; sleep 1; exit 3', restartPolicy: 'always' });
  const target = await fixture.runBot();
  const floodEnds = Math.floor(Date.now() / 1000) + FLOOD_S;
  await fixture.runBot({ script: FLOODER, args: [(await fixture.network()).gateway, String(port), String(floodEnds)] });

  // While it floods: how many of the agent's connections are busy at once, whether any write waits, and the platform's restarts.
  let busiest = 0;
  let busiestAtWindow = 0;
  let spooled = 0;
  const restarts: number[] = [];
  while (Date.now() / 1000 < floodEnds) {
    // Every busy connection of the agent's, and those of them at the rate limit's shared window (its `operations`).
    const { rows } = await watcher.query(
      "SELECT COUNT(*) AS n, COUNT(*) FILTER (WHERE query ILIKE '%operations%') AS at_window FROM pg_stat_activity WHERE datname = current_database() AND state <> 'idle' AND pid <> pg_backend_pid()",
    );
    busiest = Math.max(busiest, Number(rows[0]?.n));
    busiestAtWindow = Math.max(busiestAtWindow, Number(rows[0]?.at_window));
    const metrics = (await call(agent.server, '/metrics')).text;
    spooled = Math.max(spooled, Number(/^bot_agent_history_spool_writes (\d+)/m.exec(metrics)?.[1] ?? 0));
    if (restarts.length < 2 && Date.now() / 1000 > floodEnds - FLOOD_S + 5 * (restarts.length + 1)) {
      restarts.push((await call(agent.server, '/api/bots/restart', { body: { bot_id: target.id, user_id: 'user_1' } })).status);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const refused = /bot_agent_http_requests_total\{method="POST",route="\/api\/bots\/self\/restart",status="429"\} (\d+)/.exec((await call(agent.server, '/metrics')).text);
  t.log(`${refused?.[1]} self-restarts refused in ${FLOOD_S} s; at most ${busiest} of the agent's connections busy at once, ${busiestAtWindow} at the shared window`);
  t.true(Number(refused?.[1]) >= 20 * FLOOD_S, 'the bot flooded');
  // Before the refusals came from memory, the flood held all 10 of the pool's connections at the window. The agent's
  // other work (the crasher's records, events and webhooks) may hold a few more at once on busy cores (5 in a CI run).
  t.true(busiestAtWindow <= 2, `${busiestAtWindow} connections busy at once at the shared window: a bot's refusals took the pool`);
  t.true(busiest < 10, `${busiest} of the pool's 10 connections busy at once: none was left for others`);
  t.is(spooled, 0, 'no write had to wait for a connection');
  t.deepEqual(restarts, [200, 200]);

  // Every run of the crasher the engine ended has its record, its event and its webhook.
  const info = await crasher.container.inspect();
  const ended = info.RestartCount + (info.State.Running ? 0 : 1);
  // A run's record is kept a moment after the engine ends it (its last lines read first): on a busy host, after the flood's end.
  let exits = 0;
  await eventually(async () => {
    exits = ((await call(agent.server, `/api/bots/${crasher.id}/exits?limit=50`)).body?.exits as unknown[]).length;
    return exits >= ended - 1;
  }, 15_000, 200);
  t.true(ended >= 3);
  t.true(exits >= ended - 1, `${exits} records for ${ended} runs ended`);
  t.true(
    await eventually(() => receiver.received.filter((delivery) => delivery.type === 'exited' && delivery.body.includes(crasher.id)).length >= exits, 15_000, 100),
    'each record delivered',
  );
});
