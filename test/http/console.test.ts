import test from 'ava';
import { agentFor } from '../helpers/agent.js';
import { call } from '../helpers/http-client.js';
import { MemoryDriver } from '../helpers/memory-driver.js';

// The console's HTTP side: its session, its samples and its page (the browser's view is test/docker/console.test.ts).
const TOKEN = 'console-admin-token-0123456789abcdef0123';
const BOT = { id: 'bot_1_1_console', address: '127.0.0.9' };

async function setUp(t: Parameters<typeof agentFor>[0], config: Parameters<typeof agentFor>[2] = {}) {
  const driver = new MemoryDriver();
  driver.add({ ...BOT, ownerId: 'user_1' });
  return { driver, server: await agentFor(t, driver, { adminToken: TOKEN, loopbackPlatform: false, ...config }) };
}

const cookieOf = (setCookie: string | string[] | undefined): string => String([setCookie].flat()[0]).split(';')[0]!;
const history = `/api/bots/${BOT.id}/stats/history`;

test('the admin token buys a session cookie (HttpOnly, SameSite=Strict, Path=/, 12 hours) that is the platform, until it is ended', async (t) => {
  const { server } = await setUp(t);
  t.is((await call(server, history)).status, 403, 'no session yet');
  const wrong = await call(server, '/api/session', { body: { token: `${TOKEN}x` } });
  t.is(wrong.status, 403);
  t.regex(String(wrong.body?.msg), /not the admin token/);
  t.is(wrong.headers['set-cookie'], undefined);

  const right = await call(server, '/api/session', { body: { token: TOKEN } });
  t.like(right, { status: 200, body: { ok: true } });
  const setCookie = String([right.headers['set-cookie']].flat()[0]);
  t.regex(setCookie, /^bot_agent_session=[^;]+; path=\/; expires=[^;]+; samesite=strict; httponly$/);
  t.notRegex(setCookie, /secure/, 'not Secure over plain HTTP');
  const expires = Date.parse(/expires=([^;]+)/.exec(setCookie)![1]!);
  t.true(Math.abs(expires - Date.now() - 12 * 3600 * 1000) < 5_000);
  t.false(setCookie.includes(TOKEN));

  const cookie = cookieOf(right.headers['set-cookie']);
  t.is((await call(server, history, { headers: { cookie } })).status, 200);
  // A page of another site sent it: the cookie counts for nothing.
  t.is((await call(server, history, { headers: { cookie, origin: 'https://evil.example' } })).status, 403);
  t.is((await call(server, history, { headers: { cookie, 'sec-fetch-site': 'same-site' } })).status, 403);
  t.is((await call(server, history, { headers: { cookie, host: 'rebound.evil.example:8000' } })).status, 403);
  // A bot is a bot, whatever cookie it carries.
  const asBot = await call(server, history, { headers: { cookie }, from: BOT.address });
  t.is(asBot.status, 403);

  const ended = await call(server, '/api/session', { method: 'DELETE', headers: { cookie } });
  t.like(ended, { status: 200, body: { ok: true } });
  t.regex(String([ended.headers['set-cookie']].flat()[0]), /^bot_agent_session=; path=\/; expires=Thu, 01 Jan 1970/);
  t.is((await call(server, history, { headers: { cookie } })).status, 403, 'an ended session still counted');
});

test('behind a proxy that ended TLS the cookie is Secure; a session needs a token set, and a body that names one', async (t) => {
  const { server } = await setUp(t);
  const secure = await call(server, '/api/session', { body: { token: TOKEN }, headers: { 'x-forwarded-proto': 'https' } });
  t.regex(String([secure.headers['set-cookie']].flat()[0]), /; secure; httponly$/);
  for (const body of [{}, { token: 5 }, { token: 'x'.repeat(1025) }]) {
    const refused = await call(server, '/api/session', { body });
    t.is(refused.status, 400, JSON.stringify(body));
    t.regex(String(refused.body?.msg), /token/);
  }
  const { server: tokenless } = await setUp(t, { adminToken: undefined });
  const none = await call(tokenless, '/api/session', { body: { token: TOKEN } });
  t.is(none.status, 403);
  t.regex(String(none.body?.msg), /need AGENT_ADMIN_TOKEN/);
});

test("the stats history: every running bot's samples, oldest first, to the platform alone", async (t) => {
  const { driver, server } = await setUp(t, { adminToken: undefined, loopbackPlatform: true, statsSamples: { intervalMs: 50 } });
  await new Promise((resolve) => setTimeout(resolve, 300));
  const reply = await call(server, history);
  t.is(reply.status, 200);
  const samples = reply.body?.samples as { at: string; cpu_percent: number; memory_bytes: number; network_rx_bytes: number | null }[];
  t.true(samples.length >= 3, `${samples.length} samples`);
  t.deepEqual(samples[0], { at: samples[0]!.at, cpu_percent: 12.35, memory_bytes: 47_405_793, network_rx_bytes: null, network_tx_bytes: null });
  t.true(samples.every((sample, i) => i === 0 || Date.parse(sample.at) > Date.parse(samples[i - 1]!.at)));
  t.is((await call(server, '/api/bots/bot_1_1_none/stats/history')).status, 404);
  const own = await call(server, history, { from: BOT.address });
  t.is(own.status, 403, 'a bot reads its samples');
  t.true(driver.calls.some((name) => name.startsWith('stats:')));
});

test('the page: to a browser asking for HTML, with a strict Content-Security-Policy; its files cached for good; never to a bot', async (t) => {
  const { server } = await setUp(t, { adminToken: undefined, loopbackPlatform: true });
  const page = await call(server, '/', { headers: { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' } });
  t.is(page.status, 200);
  t.regex(String(page.headers['content-type']), /^text\/html/);
  const policy = String(page.headers['content-security-policy']);
  t.regex(policy, /frame-ancestors 'none'/);
  t.regex(policy, /script-src 'self'(;|$)/);
  t.notRegex(policy, /unsafe-inline|unsafe-eval/);
  t.is(page.headers['cache-control'], 'no-cache');
  t.notRegex(page.text, /<script>|<style>| style=| on[a-z]+=/, 'inline script or style in the page');
  const asset = /src="\/console\/([^"]+\.js)"/.exec(page.text)?.[1];
  t.truthy(asset);
  const script = await call(server, `/console/${asset}`, { headers: { 'accept-encoding': 'gzip' } });
  t.is(script.status, 200);
  t.is(script.headers['content-encoding'], 'gzip');
  t.is(script.headers['cache-control'], 'public, max-age=31536000, immutable');
  t.is((await call(server, '/console/app.missing.js')).status, 404);
  // An API client's GET / is the 404 it always was.
  t.like(await call(server, '/'), { status: 404, body: { ok: false } });
  const asBot = await call(server, '/', { headers: { accept: 'text/html' }, from: BOT.address });
  t.is(asBot.status, 403);
  t.regex(String(asBot.body?.msg), /console is the platform's/);
  t.is((await call(server, `/console/${asset}`, { from: BOT.address })).status, 403);
});

test("the fleet's table counts every run that ended in the last hour, requested or not, and shows the last exit without its lines", async (t) => {
  const { driver, server } = await setUp(t, { loopbackPlatform: true });
  const now = Date.now();
  const end = async (minutesAgo: number, requested: boolean) => {
    const at = new Date(now - minutesAgo * 60_000);
    await driver.observer?.ended({ botId: BOT.id, at, exitCode: requested ? 0 : 3, oomKilled: false, requested, startedAt: new Date(at.getTime() - 1000), logs: 'last words\n', key: `run-${minutesAgo}` });
  };
  await end(90, false);
  await end(30, true);
  await end(5, false);
  const fleet = await call(server, '/api/console/fleet');
  t.is(fleet.status, 200, fleet.text);
  const [row] = fleet.body?.bots as Array<Record<string, any>>;
  t.is(row?.restarts_last_hour, 2, 'the run ended 90 minutes ago counted, or the requested one did not');
  t.is(row?.crashes_last_hour, 1);
  t.like(row?.last_exit, { exit_code: 3, requested: false });
  t.false('logs' in (row?.last_exit ?? {}), "the table carries a record's lines");
});
