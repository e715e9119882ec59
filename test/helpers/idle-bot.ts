import type { Server } from 'node:http';
import type { ExecutionContext } from 'ava';
import { DockerFixture, IDLE_BOT, TEST_IMAGE } from './docker-fixture.js';
import { call } from './http-client.js';

/**
 * A bot created through the agent's API on the real engine: idle and quick to stop, so that a deploy's
 * switch is quick. It goes when the test ends, with the revisions a deploy kept of it (docs/api.md §15).
 */
export async function createdIdleBot(
  t: ExecutionContext,
  fixture: DockerFixture,
  server: Server,
  extra: Record<string, unknown> = {},
  headers: Record<string, string> = {},
): Promise<string> {
  const id = fixture.newBotId();
  t.teardown(async () => {
    for (const name of [id, `${id}.undo`, `${id}.previous`]) await fixture.docker.getContainer(name).remove({ force: true }).catch(() => undefined);
  });
  const body = { bot_id: id, user_id: 'user_9', image: TEST_IMAGE, template: 'telegram', token: 'tok-idle-bot', command: ['sh', '-c', IDLE_BOT], ...extra };
  const reply = await call(server, '/api/admin/bots', { body, headers });
  t.is(reply.status, 201, reply.text);
  return id;
}
