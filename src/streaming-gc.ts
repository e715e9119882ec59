/**
 * Streams of bots' data (backups, restores, verifications, moves: docs/api.md §20) allocate a buffer per chunk at
 * each stage, and V8 frees those only at a collection. A stream makes few and small objects besides, so collections
 * come seldom, and buffers that outlived two young collections wait for a full one: a gigabyte streamed left up to
 * 85 MB of dead buffers resident (BENCHMARKS.md, bench:backups and bench:move). While any such stream runs, a
 * collection every 100 ms frees them: a young one (about a millisecond), or a full one once more than 32 MiB of
 * buffers are held. Only where the agent runs with --expose-gc, as the image and `npm start` run it
 * (docs/performance.md, "Memory while a bot's data streams").
 */
type Collect = (options: { type: 'minor' | 'major'; execution: 'sync' }) => void;

const EVERY_MS = 100;
const BUFFERS_HELD_BYTES = 32 * 1024 * 1024;
let streaming = 0;
let timer: NodeJS.Timeout | undefined;

/** `work`, with the dead buffers of its streams collected as it runs (nothing where the agent has no `gc`). */
export async function whileStreaming<T>(work: () => Promise<T>): Promise<T> {
  const collect = (globalThis as { gc?: Collect }).gc;
  if (collect === undefined) return work();
  if (streaming++ === 0) {
    timer = setInterval(() => collect({ type: process.memoryUsage().arrayBuffers > BUFFERS_HELD_BYTES ? 'major' : 'minor', execution: 'sync' }), EVERY_MS).unref();
  }
  try {
    return await work();
  } finally {
    if (--streaming === 0) clearInterval(timer);
  }
}
