import test from 'ava';
import { jsonBytes } from '../../src/json-text.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { createdIdleBot } from '../helpers/idle-bot.js';
import { provisioningAgent } from '../helpers/provisioning-agent.js';
import type { ProvisioningAgent } from '../helpers/provisioning-agent.js';
import { openStream } from '../helpers/sse-client.js';
import { webhookReceiver } from '../helpers/webhook-receiver.js';

// Schedules on the real engine (docs/api.md §18): a chain every minute restarts the bot, runs a command in it and
// deploys it; commands are bounded in time and output; bad bodies are 422s that name their field.
const fixture = new DockerFixture();
let agent: ProvisioningAgent;
let receiver: Awaited<ReturnType<typeof webhookReceiver>>;

test.before(async () => {
  await fixture.ready();
  receiver = await webhookReceiver();
  agent = await provisioningAgent(fixture, 'address', { config: { webhook: { url: receiver.url, secret: 'schedules-webhook-secret-0123456789' } } });
});

test.after.always(async () => {
  await agent?.close();
  receiver?.close();
  await fixture.cleanup();
});

interface Run {
  due_at: string;
  state: string;
  reason: string | null;
  actions: { type: string; outcome: string; message: string | null; exit_code?: number | null; timed_out?: boolean; output?: string; output_truncated?: boolean }[];
}

const schedules = (botId: string) => `/api/admin/bots/${botId}/schedules`;

async function runsOf(botId: string, scheduleId: string): Promise<Run[]> {
  const reply = await call(agent.server, `/api/bots/${botId}/schedules/${scheduleId}/runs`);
  return (reply.body?.runs ?? []) as Run[];
}

async function ended(botId: string, scheduleId: string, ms: number): Promise<Run | undefined> {
  let run: Run | undefined;
  await eventually(async () => {
    run = (await runsOf(botId, scheduleId)).find((one) => one.state !== 'running');
    return run !== undefined;
  }, ms, 250);
  return run;
}

test('a schedule every minute restarts the bot, runs a command in it and deploys it, once, told to the events and the webhook', async (t) => {
  const botId = await createdIdleBot(t, fixture, agent.server, { env: { MODE: 'one' } });
  const events = await openStream(agent.server, `/api/bots/${botId}/events`);
  t.teardown(() => events.close());
  const startedBefore = (await fixture.docker.getContainer(botId).inspect()).State.StartedAt;
  const made = await call(agent.server, schedules(botId), {
    body: {
      name: 'every minute',
      cron: '* * * * *',
      actions: [
        { type: 'restart' },
        { type: 'command', command: ['sh', '-c', 'echo mark-from-$(hostname); echo to-stderr >&2'], timeout_s: 10 },
        { type: 'deploy', offset_s: 1, deploy: { env: { MODE: 'two' }, min_ready_s: 1, deadline_s: 30 } },
      ],
    },
  });
  t.is(made.status, 201, made.text);
  const schedule = made.body?.schedule as { id: string; next_due_at: string[]; actions: { deploy?: { env?: Record<string, string> } }[] };
  t.is(schedule.next_due_at.length, 5);
  t.is(Date.parse(schedule.next_due_at[1]!) - Date.parse(schedule.next_due_at[0]!), 60_000);
  t.deepEqual(schedule.actions[2]?.deploy?.env, { MODE: '(set)' }, "a deploy's values are never answered back");

  const run = await ended(botId, schedule.id, 150_000);
  t.is(run?.state, 'succeeded', JSON.stringify(run));
  t.deepEqual(run?.actions.map((action) => action.outcome), ['succeeded', 'succeeded', 'succeeded']);
  t.is(new Date(run!.due_at).getUTCSeconds(), 0, 'due at a whole minute');
  const command = run!.actions[1]!;
  t.is(command.exit_code, 0);
  t.regex(command.output ?? '', /mark-from-\S+\n/);
  t.regex(command.output ?? '', /to-stderr/);
  // The bot's own side: it was restarted and now runs the deployed revision, its variable changed.
  const now = await fixture.docker.getContainer(botId).inspect();
  t.not(now.State.StartedAt, startedBefore);
  t.true(now.Config.Env?.includes('MODE=two'), JSON.stringify(now.Config.Env));
  const revisions = (await call(agent.server, `/api/bots/${botId}/revisions`)).body?.revisions as { revision: number; outcome: string }[];
  t.deepEqual(revisions.slice(0, 2).map((one) => one.revision), [2, 1]);
  t.is(revisions[0]?.outcome, 'succeeded');
  // Revision 1 succeeded, or the schedule's restart came while it was still judged (docs/api.md §15).
  t.true(['succeeded', 'interrupted'].includes(revisions[1]?.outcome ?? ''), revisions[1]?.outcome);
  t.truthy(await events.next((event) => event.event === 'schedule-succeeded', 10_000));
  t.true(events.events.some((event) => event.event === 'schedule-started'));
  t.true(events.events.some((event) => event.event === 'operation' && event.data.operation === 'restart'));
  t.true(await eventually(() => receiver.received.some((hook) => hook.type === 'schedule-succeeded' && hook.schedule_id === schedule.id), 15_000), 'the webhook was told');
  // Turned off, it has no next due time, and runs no more.
  const off = await call(agent.server, `${schedules(botId)}/${schedule.id}/disable`, { method: 'POST' });
  t.is(off.status, 200, off.text);
  t.deepEqual((off.body?.schedule as { next_due_at: string[] }).next_due_at, []);
  const removed = await call(agent.server, `${schedules(botId)}/${schedule.id}`, { method: 'DELETE' });
  t.is(removed.status, 200, removed.text);
  t.is((await call(agent.server, `/api/bots/${botId}/schedules/${schedule.id}/runs`)).status, 404);
});

test('a command that hangs is killed at its time-out; one that writes too much is cut and says so', async (t) => {
  const botId = await createdIdleBot(t, fixture, agent.server);
  const made = await call(agent.server, schedules(botId), {
    body: {
      cron: '0 0 1 1 *',
      actions: [
        { type: 'command', command: ['sleep', '317'], timeout_s: 2, continue_on_failure: true },
        { type: 'command', command: ['sh', '-c', 'i=0; while [ $i -lt 3000 ]; do echo "0123456789\\"\\u0001 line $i"; i=$((i+1)); done'] },
      ],
    },
  });
  t.is(made.status, 201, made.text);
  const { id } = made.body?.schedule as { id: string };
  const asked = await call(agent.server, `${schedules(botId)}/${id}/run`, { method: 'POST' });
  t.is(asked.status, 202, asked.text);
  const again = await call(agent.server, `${schedules(botId)}/${id}/run`, { method: 'POST' });
  t.is(again.status, 409, 'a run now while one goes');
  const run = await ended(botId, id, 60_000);
  t.is(run?.state, 'failed');
  const [hung, loud] = run!.actions;
  t.true(hung?.timed_out);
  t.is(hung?.outcome, 'failed');
  t.regex(hung?.message ?? '', /killed at its time-out of 2 s/);
  const ps = await fixture.docker.getContainer(botId).exec({ Cmd: ['ps'], AttachStdout: true, AttachStderr: true });
  const stream = await ps.start({});
  let listing = '';
  stream.on('data', (chunk: Buffer) => (listing += chunk.toString('latin1')));
  await new Promise((resolve) => stream.on('end', resolve));
  t.notRegex(listing, /sleep 317/, 'the hung command is gone from the bot');
  t.is(loud?.outcome, 'succeeded');
  t.true(loud?.output_truncated);
  t.true(jsonBytes(loud?.output ?? '') <= 64 * 1024, 'bounded as JSON, escapes and all');
  t.true(jsonBytes(loud?.output ?? '') > 60 * 1024);
});

test('bad schedules are 422s naming their field; a bot may have 20; a backup waits for bot data', async (t) => {
  const botId = await createdIdleBot(t, fixture, agent.server);
  const refused = async (body: unknown, pattern: RegExp) => {
    const reply = await call(agent.server, schedules(botId), { body });
    t.is(reply.status, 422, reply.text);
    t.regex(String(reply.body?.msg), pattern);
  };
  await refused({ cron: '* * * *', actions: [{ type: 'restart' }] }, /^cron must have five fields/);
  await refused({ cron: '61 * * * *', actions: [{ type: 'restart' }] }, /^cron is not a valid expression/);
  await refused({ cron: '* * * * *', time_zone: 'Mars/Olympus', actions: [{ type: 'restart' }] }, /^time_zone must be an IANA time zone/);
  await refused({ cron: '* * * * *', actions: [{ type: 'restart', offset_s: 901 }] }, /^actions\[0\]\.offset_s must be a whole number from 0 to 900/);
  await refused({ cron: '* * * * *', actions: [{ type: 'restart', cmd: 'x' }] }, /^unknown field "actions\[0\]\.cmd"/);
  await refused({ cron: '* * * * *', sometimes: true, actions: [{ type: 'restart' }] }, /^unknown field "sometimes"/);
  await refused({ cron: '* * * * *', actions: [{ type: 'command' }] }, /actions\[0\]\.command is required/);
  await refused({ cron: '* * * * *', actions: [{ type: 'reboot' }] }, /type must be one of restart, stop, start, deploy, backup, verify, command/);
  // This agent keeps its history in memory, with no backup folder (docs/api.md §20).
  await refused({ cron: '* * * * *', actions: [{ type: 'backup' }] }, /actions\[0\]\.type backup is not available on this agent/);
  await refused({ cron: '* * * * *', actions: [{ type: 'backup', mode: 'snapshot' }] }, /^actions\[0\]\.mode must be stop, live or pre/);
  await refused({ cron: '* * * * *', actions: [{ type: 'deploy', deploy: { min_ready_s: -1 } }] }, /actions\[0\]\.deploy\.min_ready_s must be a whole number/);
  for (let n = 0; n < 20; n += 1) {
    const reply = await call(agent.server, schedules(botId), { body: { cron: '@yearly', enabled: false, actions: [{ type: 'start' }] } });
    t.is(reply.status, 201, reply.text);
  }
  const past = await call(agent.server, schedules(botId), { body: { cron: '@yearly', actions: [{ type: 'start' }] } });
  t.is(past.status, 409);
  t.regex(String(past.body?.msg), /has 20 schedules, the most a bot may have/);
  const [first] = (await call(agent.server, schedules(botId))).body?.schedules as Array<{ id: string }>;
  const some = `${schedules(botId)}/${first?.id}`;
  for (const body of [undefined, {}]) {
    const empty = await call(agent.server, some, { method: 'PATCH', body });
    t.is(empty.status, 422, `a change of nothing (${JSON.stringify(body)}) is refused`);
    t.regex(String(empty.body?.msg), /^a change names at least one of name, cron/);
  }
  t.is((await call(agent.server, '/api/admin/bots/bot_1_1_nosuchbot/schedules')).status, 404);
  t.is((await call(agent.server, `${schedules(botId)}/sch_0123456789abcdef`)).status, 404);
});
