// Backups of a bot's data on the real engine and a real S3 server (docs/api.md §20, docs/data.md): a bot with
// N MiB in its data folder (1,024 unless given: npm run bench:backups -- 256), backed up in stop mode to the
// agent's folder and to versitygw (scripts/s3.sh), verified from the store, and restored. Reports each step's
// time, the bot's downtime in stop mode, and the agent's peak resident memory above its rest (the archive is
// streamed: the target is within 64 MB of rest however large the folder). npm run bench:backups runs it with the
// agent's own V8 flags and malloc settings (see the Dockerfile).
// Prints the figures and writes them into BENCHMARKS.md between its markers.
// Run as root, with the engine up: npm run bench:backups
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { assembleAgent } from '../src/agent.js';
import { listen } from '../src/http/listen.js';
import { createDockerDriver } from '../src/runtime/docker/docker-driver.js';
import { createDockerProvisioner } from '../src/runtime/docker/docker-provisioner.js';
import { TEST_APP_CONFIG } from '../test/helpers/agent.js';
import { DockerFixture, IDLE_BOT, TEST_IMAGE } from '../test/helpers/docker-fixture.js';
import { newBucket, S3_KEYS } from '../test/helpers/s3.js';
import { writeSection } from './bench-sections.js';

const mib = Number(process.argv[2] ?? 1_024);
const fixture = new DockerFixture();
const dir = mkdtempSync(join(tmpdir(), 'bench-backups-'));
process.env.BOT_AGENT_S3 ??= execFileSync('bash', ['scripts/s3.sh'], { encoding: 'utf8' }).trim().split('\n').at(-1);

await fixture.ready();
const { bucket } = await newBucket('bench-backups');
const storesFile = join(dir, 'stores.json');
writeFileSync(storesFile, JSON.stringify({ stores: [{ name: 'bench', endpoint: process.env.BOT_AGENT_S3, bucket, access_key_id: S3_KEYS.accessKeyId, secret_access_key: S3_KEYS.secretAccessKey, timeout_s: 120 }] }));
const driver = createDockerDriver({ dockerHost: fixture.dockerHost });
const made = assembleAgent({
  driver,
  provisioner: createDockerProvisioner({ dockerHost: fixture.dockerHost, network: (await fixture.network()).name, agentUrl: 'http://agent:8000' }),
  config: { ...TEST_APP_CONFIG, backupDir: join(dir, 'backups'), backupStoresFile: storesFile },
  logger: pino({ level: 'silent' }),
  watchdog: 'off',
  statsSamples: 'off',
});
const server = await listen(made.app, '127.0.0.1', 0);
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
const json = async (path: string, method = 'GET', body?: unknown) => {
  const reply = await fetch(`${base}${path}`, { method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  const answer = (await reply.json()) as Record<string, unknown>;
  if (!reply.ok) throw new Error(`${method} ${path}: ${reply.status} ${JSON.stringify(answer)}`);
  return answer;
};

/** The agent's peak resident memory while `work` runs, sampled every 50 ms, above what it was as it began. */
async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number; peakMb: number }> {
  global.gc?.();
  const rest = process.memoryUsage().rss;
  let peak = rest;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 50);
  const began = performance.now();
  try {
    const value = await work();
    return { value, ms: Math.round(performance.now() - began), peakMb: Math.round((Math.max(peak, process.memoryUsage().rss) - rest) / 1024 / 1024) };
  } finally {
    clearInterval(sampler);
  }
}

const botId = fixture.newBotId();
try {
  await json('/api/admin/bots', 'POST', { bot_id: botId, user_id: 'user_1', image: TEST_IMAGE, template: 'n8n', token: '-', command: ['sh', '-c', IDLE_BOT], data: [{ path: '/data' }] });
  // A first round over a few bytes: the code every step runs is loaded before the agent's rest is taken.
  await fixture.exec({ id: botId, container: fixture.docker.getContainer(botId) }, 'echo warm > /data/warm');
  const warm = (await json(`/api/admin/bots/${botId}/backups`, 'POST', { mode: 'live', stores: ['bench'] })).backup as { id: string };
  await json(`/api/admin/bots/${botId}/backups/${warm.id}`, 'DELETE');
  await json(`/api/admin/bots/${botId}/backups/${warm.id}/verify?store=bench`, 'POST');
  await json(`/api/admin/bots/${botId}/backups/${warm.id}/restore`, 'POST');
  // Random bytes: gzip gains nothing on them, as on a bot's already-compressed files.
  await fixture.exec({ id: botId, container: fixture.docker.getContainer(botId) }, `head -c ${mib * 1024 * 1024} /dev/urandom > /data/blob`);
  const backup = await timed(() => json(`/api/admin/bots/${botId}/backups`, 'POST', { mode: 'stop', stores: ['bench'] }));
  const kept = backup.value.backup as { id: string; downtime_ms: number; size_bytes: number };
  // The folder's copy removed: the verification brings the store's copy in first.
  await json(`/api/admin/bots/${botId}/backups/${kept.id}`, 'DELETE');
  const verify = await timed(() => json(`/api/admin/bots/${botId}/backups/${kept.id}/verify?store=bench`, 'POST'));
  const restore = await timed(() => json(`/api/admin/bots/${botId}/backups/${kept.id}/restore`, 'POST'));
  const rows = [
    ['backup, stop mode, to the folder and to S3', backup],
    ['verify from S3 (brought into the folder, checked, unpacked beside the bot, read back)', verify],
    ['restore (checked, unpacked, read back, swapped; before kept)', restore],
  ] as const;
  const body = [
    `Backups of a bot with ${mib} MiB of random bytes in its data folder, on this machine's engine and versitygw on loopback (npm run bench:backups):`,
    '',
    '| step | time | agent memory above rest |',
    '|---|---|---|',
    ...rows.map(([what, result]) => `| ${what} | ${(result.ms / 1000).toFixed(1)} s | ${result.peakMb} MB |`),
    '',
    `The bot's downtime in stop mode: ${(kept.downtime_ms / 1000).toFixed(1)} s (the copy of ${Math.round(kept.size_bytes / 1024 / 1024)} MiB compressed). Target: the agent within 64 MB of its rest at every step.`,
    '',
    "The agent runs in this process with the image's V8 flags and malloc settings, `--expose-gc` among them (docs/performance.md, \"Memory while a bot's data streams\"); resident memory sampled every 50 ms, its rest taken after a full collection as each step begins.",
  ].join('\n');
  console.log(body);
  writeSection('backups', body);
} finally {
  await fixture.docker.getContainer(botId).remove({ force: true, v: true }).catch(() => undefined);
  for (const volume of (await fixture.docker.listVolumes({ filters: { label: [`bot-agent/bot-id=${botId}`] } })).Volumes ?? []) await fixture.docker.getVolume(volume.Name).remove().catch(() => undefined);
  server.closeAllConnections();
  server.close();
  await made.close();
  await driver.close();
  await fixture.cleanup();
  rmSync(dir, { recursive: true, force: true });
}
