/**
 * A local copy of what a runtime holds, kept current by a watch, with indexes
 * by what the driver looks objects up by (client-go's informer and indexer:
 * a watch feeds an indexed store, which says when it has synced). Both
 * runtimes keep theirs in these words: Docker's bots by address and bot id,
 * Kubernetes' Deployments and pods.
 */
export interface IndexedCache<T, Index extends string> {
  /**
   * The objects filed under `key` in `index`, none when nothing is; undefined
   * while the copy is not current (before its first listing, or while its
   * watch is down): the caller then asks the runtime itself.
   */
  byIndex(index: Index, key: string): readonly T[] | undefined;
  /** How many keys `index` has; 0 while the copy is not current. */
  count(index: Index): number;
  /** Whether the first listing and watch are over, answered from the copy or failed; an agent is not ready before. */
  readonly synced: boolean;
}
