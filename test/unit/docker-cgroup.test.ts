import { mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { totalmem, tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { blockIo, CgroupStats, MIN_INTERVAL_MS, networkIo, readCgroup, statsBetween } from '../../src/runtime/docker/docker-cgroup.js';

async function tree(t: { teardown(fn: () => Promise<void>): void }, files: Record<string, string>): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'cgroup-'));
  t.teardown(() => rm(root, { recursive: true, force: true }));
  for (const [path, content] of Object.entries(files)) {
    await mkdir(join(root, path, '..'), { recursive: true });
    await writeFile(join(root, path), content);
  }
  return root;
}

/** A v1 (cgroupfs) tree of container `abc`: its CPU time in ns, 1,000 bytes used of a 4,000-byte limit. */
const v1Abc = (cpuNs: string): Record<string, string> => ({
  'cpuacct/docker/abc/cpuacct.usage': `${cpuNs}\n`,
  'memory/docker/abc/memory.usage_in_bytes': '1000\n',
  'memory/docker/abc/memory.stat': 'total_inactive_file 0\n',
  'memory/docker/abc/memory.limit_in_bytes': '4000\n',
});

test('cgroup v1 (cgroupfs driver): memory without inactive file cache, limit capped at the host', async (t) => {
  const root = await tree(t, {
    'cpuacct/docker/abc/cpuacct.usage': '5000000000\n',
    'memory/docker/abc/memory.usage_in_bytes': '104857600\n',
    'memory/docker/abc/memory.stat': 'cache 5\ninactive_file 1\ntotal_inactive_file 20971520\n',
    'memory/docker/abc/memory.limit_in_bytes': '9223372036854771712\n',
  });
  const reading = await readCgroup('abc', root);
  t.like(reading, { cpuNs: 5e9, memoryBytes: 80 * 1024 * 1024, limitBytes: totalmem() });
});

test('cgroup v2 (systemd driver): usage_usec, memory.current, memory.max', async (t) => {
  const root = await tree(t, {
    'system.slice/docker-abc.scope/cpu.stat': 'usage_usec 2500\nuser_usec 2000\n',
    'system.slice/docker-abc.scope/memory.current': '1000\n',
    'system.slice/docker-abc.scope/memory.stat': 'anon 10\ninactive_file 200\n',
    'system.slice/docker-abc.scope/memory.max': '4000\n',
  });
  t.like(await readCgroup('abc', root), { cpuNs: 2_500_000, memoryBytes: 800, limitBytes: 4000 });
});

test('a container whose cgroup is not visible gives no reading', async (t) => {
  const root = await tree(t, { 'cpuacct/docker/other/cpuacct.usage': '1' });
  t.is(await readCgroup('abc', root), undefined);
});

test('CPU % is CPU time over wall time, 100 for one full CPU', (t) => {
  const before = { cpuNs: 1e9, at: 0n, memoryBytes: 0, limitBytes: 100 };
  const after = { cpuNs: 2.5e9, at: 1_000_000_000n, memoryBytes: 25, limitBytes: 100 };
  t.deepEqual(statsBetween(before, after, new Date(0)), {
    cpuPercent: 150,
    memoryBytes: 25,
    memoryPercent: 25,
    memoryLimitBytes: 100,
    startedAt: new Date(0),
  });
});

test('on-demand stats: reads at once share one first measurement, reads within the interval its answer; none where the engine\'s cgroups are not visible', async (t) => {
  const usage = 'cpuacct/docker/abc/cpuacct.usage';
  const root = await tree(t, v1Abc('0'));
  const stats = new CgroupStats(root);
  const startedAt = new Date(0);
  const firstReads = [stats.stats('abc', startedAt), stats.stats('abc', startedAt)];
  // Half a second of CPU time, used after the first reading (which comes at once) and before the second (1 s later).
  await new Promise((resolve) => setTimeout(resolve, 300));
  await writeFile(join(root, usage), '500000000\n');
  const [one, two] = await Promise.all(firstReads);
  t.deepEqual(one, two);
  t.true(one!.cpuPercent > 0 && one!.cpuPercent <= 50, `${one!.cpuPercent}`);
  t.is(one!.memoryPercent, 25);
  await writeFile(join(root, usage), '900000000\n');
  t.deepEqual(await stats.stats('abc', startedAt), one, `within ${MIN_INTERVAL_MS} ms of the last reading`);
  t.is(await new CgroupStats(await tree(t, { 'memory/other/memory.current': '1' })).stats('abc', startedAt), undefined);
});

test('a run that is read keeps its cgroup files open, and reads them again in place; once let go, they are opened again', async (t) => {
  const root = await tree(t, {
    ...v1Abc('0'),
  });
  const stats = new CgroupStats(root);
  t.teardown(() => stats.close());
  const startedAt = new Date(0);
  t.is((await stats.stats('abc', startedAt))?.memoryPercent, 25);
  // Moved away, the files are out of reach by their paths, not through what is held open.
  await rename(join(root, 'memory/docker/abc'), join(root, 'memory/docker/moved'));
  await writeFile(join(root, 'memory/docker/moved/memory.usage_in_bytes'), '2000\n');
  await new Promise((resolve) => setTimeout(resolve, MIN_INTERVAL_MS));
  t.is((await stats.stats('abc', startedAt))?.memoryPercent, 50);
  stats.close();
  await new Promise((resolve) => setTimeout(resolve, MIN_INTERVAL_MS));
  t.is(await stats.stats('abc', startedAt), undefined);
});

test('a container started again is a new run: measured afresh from its new cgroup files, never answered with the last run\'s figures', async (t) => {
  const files = {
    ...v1Abc('900000000'),
  };
  const root = await tree(t, files);
  const stats = new CgroupStats(root);
  t.teardown(() => stats.close());
  const firstRun = new Date(0);
  t.is((await stats.stats('abc', firstRun))?.memoryPercent, 25);
  // The engine makes a restarted container's cgroup anew: new files, counters from zero.
  await rm(join(root, 'memory/docker/abc'), { recursive: true });
  await rm(join(root, 'cpuacct/docker/abc'), { recursive: true });
  for (const [path, content] of Object.entries(files)) {
    await mkdir(join(root, path, '..'), { recursive: true });
    await writeFile(join(root, path), path.endsWith('usage_in_bytes') ? '2000\n' : path.endsWith('cpuacct.usage') ? '0\n' : content);
  }
  const secondRun = new Date(60_000);
  t.is(stats.recent('abc', secondRun), undefined, 'the last run\'s answer given for the new run');
  const measured = stats.stats('abc', secondRun);
  await new Promise((resolve) => setTimeout(resolve, 300));
  await writeFile(join(root, 'cpuacct/docker/abc/cpuacct.usage'), '500000000\n');
  const answer = await measured;
  t.is(answer?.memoryPercent, 50, 'read from the last run\'s files');
  t.deepEqual(answer?.startedAt, secondRun);
  t.true(answer!.cpuPercent > 0 && answer!.cpuPercent <= 50, `${answer!.cpuPercent}`);
  t.deepEqual(stats.recent('abc', secondRun), answer);
  t.is(stats.recent('abc', firstRun), undefined);
});

test("block I/O summed over devices from v1's blkio.throttle.io_service_bytes and v2's io.stat; network from net/dev without loopback", async (t) => {
  const root = await tree(t, {
    'cpuacct/docker/abc/cpuacct.usage': '5\n',
    'memory/docker/abc/memory.usage_in_bytes': '10\n',
    'memory/docker/abc/memory.stat': 'total_inactive_file 0\n',
    'memory/docker/abc/memory.limit_in_bytes': '100\n',
    'blkio/docker/abc/blkio.throttle.io_service_bytes': '8:0 Read 4096\n8:0 Write 512\n8:0 Sync 4608\n8:0 Total 4608\n8:16 Read 100\n8:16 Write 0\nTotal 4708\n',
  });
  // No cgroup.procs: the network is not known, the rest is.
  t.like(await readCgroup('abc', root), { io: { blockReadBytes: 4196, blockWriteBytes: 512, networkRxBytes: null, networkTxBytes: null } });
  const v2 = await tree(t, {
    'docker/abc/cpu.stat': 'usage_usec 1\n',
    'docker/abc/memory.current': '1\n',
    'docker/abc/memory.stat': 'inactive_file 0\n',
    'docker/abc/memory.max': 'max\n',
    'docker/abc/io.stat': '8:0 rbytes=1000 wbytes=20 rios=3 wios=1 dbytes=0 dios=0\n8:16 rbytes=5 wbytes=7 rios=1 wios=1 dbytes=0 dios=0\n',
  });
  t.like(await readCgroup('abc', v2), { io: { blockReadBytes: 1005, blockWriteBytes: 27 } });
  t.deepEqual(
    networkIo(
      'Inter-|   Receive                                                |  Transmit\n' +
        ' face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n' +
        '    lo: 20090738169 23824645    0    0    0     0          0         0 20090738169 23824645    0    0    0     0       0          0\n' +
        '  eth0:  4204   17    0    0    0     0          0         0 2124  13    0    0    0     0       0          0\n' +
        'veth2f37d9aa:   98881     314    0    0    0     0          0         0    91068     313    0    0    0     0       0          0\n',
    ),
    { networkRxBytes: 4204 + 98881, networkTxBytes: 2124 + 91068 },
  );
  t.deepEqual(blockIo(undefined, true), { blockReadBytes: null, blockWriteBytes: null });
});
