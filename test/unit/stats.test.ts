import test from 'ava';
import { formatMegabytes, formatUptime, statsView } from '../../src/http/stats-view.js';
import { botStatsFrom, cpuPercent, ioOf, memoryBytes } from '../../src/runtime/docker/docker-stats.js';

// Figures shaped like a real engine answer: 2 CPUs, 0.5 s of CPU time over 1 s of 2-CPU system time.
const sample = {
  cpu_stats: { cpu_usage: { total_usage: 1_500_000_000 }, system_cpu_usage: 12_000_000_000, online_cpus: 2 },
  precpu_stats: { cpu_usage: { total_usage: 1_000_000_000 }, system_cpu_usage: 10_000_000_000, online_cpus: 2 },
  memory_stats: { usage: 60 * 1024 * 1024, limit: 1024 * 1024 * 1024, stats: { total_inactive_file: 10 * 1024 * 1024 } },
};

test('CPU % is the docker CLI formula over the two readings', (t) => {
  t.is(cpuPercent(sample), 50);
});

test('CPU % is 0 when there is no earlier reading (one-shot) or no progress', (t) => {
  t.is(cpuPercent({ ...sample, precpu_stats: {} }), 0);
  t.is(cpuPercent({ ...sample, precpu_stats: sample.cpu_stats }), 0);
});

test('CPU count falls back to the per-CPU list when online_cpus is missing', (t) => {
  const cpu = { cpu_usage: { total_usage: 1_500_000_000, percpu_usage: [1, 2, 3, 4] }, system_cpu_usage: 12_000_000_000 };
  t.is(cpuPercent({ ...sample, cpu_stats: cpu }), 100);
});

test('memory leaves out the page cache on cgroup v1 and v2', (t) => {
  t.is(memoryBytes(sample), 50 * 1024 * 1024);
  t.is(memoryBytes({ memory_stats: { usage: 100, stats: { inactive_file: 30 } } }), 70);
  t.is(memoryBytes({ memory_stats: { usage: 100, stats: { total_inactive_file: 300 } } }), 100);
  t.is(memoryBytes({}), 0);
});

test('memory percent is against the limit', (t) => {
  const stats = botStatsFrom(sample, new Date(0));
  t.is(Number(stats.memoryPercent.toFixed(4)), Number(((50 / 1024) * 100).toFixed(4)));
  t.is(botStatsFrom({ memory_stats: { usage: 5 } }, new Date(0)).memoryPercent, 0);
});

test("the engine's network and block I/O summed as the docker CLI sums them; null where the sample has none", (t) => {
  t.deepEqual(
    ioOf({
      networks: { eth0: { rx_bytes: 100, tx_bytes: 20 }, eth1: { rx_bytes: 1, tx_bytes: 2 } },
      blkio_stats: { io_service_bytes_recursive: [{ op: 'Read', value: 4096 }, { op: 'Write', value: 10 }, { op: 'read', value: 4 }, { op: 'Total', value: 4110 }] },
    }),
    { networkRxBytes: 101, networkTxBytes: 22, blockReadBytes: 4100, blockWriteBytes: 10 },
  );
  t.deepEqual(ioOf({ blkio_stats: { io_service_bytes_recursive: null } }), { networkRxBytes: null, networkTxBytes: null, blockReadBytes: null, blockWriteBytes: null });
});

test('uptime is whole hours and minutes', (t) => {
  t.is(formatUptime(0), '0h 0m');
  t.is(formatUptime(59_999), '0h 0m');
  t.is(formatUptime((27 * 60 + 3) * 60_000 + 59_000), '27h 3m');
  t.is(formatUptime(-5), '0h 0m');
});

test('memory usage is megabytes with two decimals', (t) => {
  t.is(formatMegabytes(47_405_793), '45.21 MB');
  t.is(formatMegabytes(0), '0.00 MB');
});

test('the stats view rounds percentages to two decimals', (t) => {
  const view = statsView(
    { cpuPercent: 3.14159, memoryBytes: 1024 * 1024, memoryPercent: 0.005, memoryLimitBytes: 20 * 1024 ** 3, startedAt: new Date(0) },
    new Date(90 * 60_000),
  );
  t.deepEqual(view, { cpu_percent: 3.14, memory_usage: '1.00 MB', memory_percent: 0.01, uptime: '1h 30m', memory_bytes: 1_048_576, memory_limit_bytes: 21_474_836_480, uptime_s: 5_400, network_rx_bytes: null, network_tx_bytes: null, block_read_bytes: null, block_write_bytes: null });
});
