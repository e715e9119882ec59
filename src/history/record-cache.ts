import { LRUCache } from 'lru-cache';
import type { KeptRecord } from './history-store.js';

/** The most bytes the records held take (their exit's logs most of it), and how many changes are remembered. */
const RECORD_BYTES = 8 * 1024 * 1024;
const CHANGES_KEPT = 50_000;
/** A record unread this long is read again from the store however quiet its bot (a change missed is not held for ever). */
const RECORD_TTL_MS = 5 * 60_000;

/**
 * The history's record of each bot a status read asked for lately (docs/performance.md): a status read takes it from
 * memory, not from the store, until an event of the bot (kept by any agent sharing the store) or a write of this
 * agent's says it changed. A read of the store begun before a change is not kept: each bot's changes are counted,
 * and a record is kept only if none came while it was read.
 */
export class RecordCache {
  private readonly records = new LRUCache<string, KeptRecord>({
    maxSize: RECORD_BYTES,
    ttl: RECORD_TTL_MS,
    sizeCalculation: (record) => 256 + (record.lastExit?.logs.length ?? 0) * 2 + record.crashes.length * 8,
  });
  private readonly changes = new LRUCache<string, number>({ max: CHANGES_KEPT });

  get(botId: string): KeptRecord | undefined {
    return this.records.get(botId);
  }

  /** A mark to hand to `put` with what a read of the store begun now found. */
  mark(botId: string): number {
    return this.changes.get(botId) ?? 0;
  }

  /** Keeps what a read of the store begun at `mark` found, unless the bot changed since. */
  put(botId: string, mark: number, record: KeptRecord): void {
    if ((this.changes.get(botId) ?? 0) === mark) this.records.set(botId, record);
  }

  /** The bot's records changed: its record is read from the store again. */
  changed(botId: string): void {
    this.changes.set(botId, (this.changes.get(botId) ?? 0) + 1);
    this.records.delete(botId);
  }
}
