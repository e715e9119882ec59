import type { BotStats } from '../runtime/driver.js';

/** The stats object of the wire format (seed, "Stats object"). */
export interface StatsView {
  cpu_percent: number;
  memory_usage: string;
  memory_percent: number;
  uptime: string;
}

const round2 = (value: number): number => Math.round(value * 100) / 100;

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
  };
}
