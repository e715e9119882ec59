import type { BotRecord } from '../history/bot-history.js';
import type { ExitRecord } from '../history/history-store.js';
import type { HealthView } from '../health/watchdog.js';
import type { BotInfo, BotStats } from '../runtime/driver.js';

/** The stats object of the wire format (seed, "Stats object"). */
export interface StatsView {
  cpu_percent: number;
  memory_usage: string;
  memory_percent: number;
  uptime: string;
  /** Beside the seed's strings, the same as numbers a program reads (docs/api.md §2). */
  memory_bytes: number;
  memory_limit_bytes: number;
  uptime_s: number;
  /** The run's I/O so far; null where the runtime does not tell it (Kubernetes). */
  network_rx_bytes: number | null;
  network_tx_bytes: number | null;
  block_read_bytes: number | null;
  block_write_bytes: number | null;
}

export const round2 = (value: number): number => Math.round(value * 100) / 100;

/** A duration as whole hours and minutes, e.g. `27h 3m`. */
export function formatUptime(ms: number): string {
  const minutes = Math.max(0, Math.floor(ms / 60_000));
  return `${Math.floor(minutes / 60)}h ${minutes % 60}m`;
}

/** Bytes as megabytes (2^20 bytes) with two decimals, e.g. `45.21 MB`. */
export function formatMegabytes(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(2)} MB`;
}

/** The wire form of a stats reading taken at `now`. */
export function statsView(stats: BotStats, now: Date): StatsView {
  return {
    cpu_percent: round2(stats.cpuPercent),
    memory_usage: formatMegabytes(stats.memoryBytes),
    memory_percent: round2(stats.memoryPercent),
    uptime: formatUptime(now.getTime() - stats.startedAt.getTime()),
    memory_bytes: Math.max(0, Math.round(stats.memoryBytes)),
    memory_limit_bytes: Math.max(0, Math.round(stats.memoryLimitBytes)),
    uptime_s: Math.max(0, Math.floor((now.getTime() - stats.startedAt.getTime()) / 1000)),
    network_rx_bytes: stats.io?.networkRxBytes ?? null,
    network_tx_bytes: stats.io?.networkTxBytes ?? null,
    block_read_bytes: stats.io?.blockReadBytes ?? null,
    block_write_bytes: stats.io?.blockWriteBytes ?? null,
  };
}

/** A bot's state as GET /api/bots/{bot_id} answers it (docs/api.md §8). */
export interface BotStatusView {
  readonly bot_id: string;
  readonly user_id: string | null;
  readonly state: 'running' | 'stopped' | 'exited' | 'crash-looping' | 'given-up';
  readonly started_at: string | null;
  readonly uptime: string | null;
  readonly crashes_last_hour: number;
  readonly last_exit: ExitRecord | null;
  readonly health: HealthView;
  /** The node whose runtime holds the bot (docs/api.md §17). */
  readonly node: string;
}

/** The wire form of a bot's status at `now`: what the runtime on `node` says of it (`info`), what its records say, and its health. */
export function statusView(info: Pick<BotInfo, 'id' | 'ownerId' | 'running' | 'startedAt'>, record: BotRecord, health: HealthView, now: Date, node: string): BotStatusView {
  const { lastExit, crashLooping, crashesLastHour, givenUp } = record;
  const state =
    givenUp && !info.running ? 'given-up' : crashLooping ? 'crash-looping' : info.running ? 'running' : lastExit && !lastExit.requested ? 'exited' : 'stopped';
  return {
    bot_id: info.id,
    user_id: info.ownerId ?? null,
    state,
    started_at: info.running ? (info.startedAt?.toISOString() ?? null) : null,
    uptime: info.running && info.startedAt ? formatUptime(now.getTime() - info.startedAt.getTime()) : null,
    crashes_last_hour: crashesLastHour,
    last_exit: lastExit,
    health,
    node,
  };
}
