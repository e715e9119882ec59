import type { HistorySearch, LogStore, StoredLine } from '../../src/log-history/log-store.js';

/** A search of the log history's store: newest first, 1,000 lines a page, no bound of bytes or time unless `over` says. */
export const historySearch = (over: Partial<HistorySearch> = {}): HistorySearch => ({
  order: 'newest',
  limit: 1_000,
  maxBytes: Infinity,
  lineBytes: (line) => line.text.length,
  budgetMs: Infinity,
  ...over,
});

/** Every line the search finds, page after page of `limit`. */
export async function allPages(store: LogStore, botId: string, over: Partial<HistorySearch>, between?: () => Promise<void>): Promise<StoredLine[]> {
  const lines: StoredLine[] = [];
  let after = over.after;
  for (let page = 0; page < 10_000; page++) {
    const found = await store.search(botId, historySearch({ ...over, after }));
    lines.push(...found.lines);
    if (found.next === undefined) return lines;
    after = found.next;
    await between?.();
  }
  throw new Error('the pages never ended');
}
