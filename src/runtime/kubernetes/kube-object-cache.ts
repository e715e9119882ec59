import { setTimeout as sleep } from 'node:timers/promises';
import { ListWatch, Watch } from '@kubernetes/client-node';
import type { KubeConfig, KubernetesListObject, KubernetesObject, V1Pod } from '@kubernetes/client-node';
import type { FaultReporter } from '../driver.js';
import type { IndexedCache } from '../indexed-cache.js';

/** How long after a broken watch it is opened again; also the longest wait between a watch's normal end and the next. */
const REOPEN_MS = 1_000;
/** Objects a page of the first list (and of a list after a watch too old to resume) asks for. */
export const LIST_PAGE = 500;
/**
 * How long one page of a watch's list may take: a page of 500 pods is some 4 MB of JSON, more than a call's
 * deadline allows on a busy API server, but an API server that never answers must not hold the list (and the
 * agent's readiness) for ever: past it the list fails, is reported and is read again.
 */
export const LIST_PAGE_DEADLINE_MS = 15_000;

/** One page of a list, a bounded number of objects from where the page before it ended (`from`: its `continue`). */
export type ListPage<T extends KubernetesObject> = (from: string | undefined) => Promise<KubernetesListObject<T>>;

type Handler<T> = (object: T) => void;

/**
 * A local copy of one kind of object (the bots' Deployments, or their pods),
 * kept current by client-node's ListWatch, with indexes by what the driver
 * looks objects up by (a bot id, a pod IP). It answers only while its watch is
 * open; otherwise `byIndex` says so and the caller asks the API server.
 */
export class KubeObjectCache<T extends KubernetesObject> implements IndexedCache<T, string> {
  private readonly informer: ListWatch<T>;
  /** index → key → uid → object */
  private readonly indexes = new Map<string, Map<string, Map<string, T>>>();
  /** uid → the [index, key] pairs it is filed under */
  private readonly filed = new Map<string, Array<[string, string]>>();
  private readonly waiters = new Set<() => void>();
  private current = false;
  /** The first list and watch have ended one way or the other: the copy was current once, or the watch failed. */
  private settled = false;
  private closed = false;
  private changeCount = 0;

  constructor(
    kubeConfig: KubeConfig,
    path: string,
    list: ListPage<T>,
    labelSelector: string,
    private readonly keys: Record<string, (object: T) => string | undefined>,
    private readonly what: string,
    private readonly report: FaultReporter,
    /** Drops from each object, as it comes in, what the agent never reads of it: at 5,000 bots, memory. */
    private readonly dropUnread: (object: T) => void = dropManagedFields,
  ) {
    const watch = new Watch(kubeConfig);
    // Current once the list has been read and the watch answers; no longer when it ends.
    const opened: Watch = Object.assign(Object.create(watch) as Watch, {
      watch: async (...[watchPath, query, callback, done]: Parameters<Watch['watch']>) => {
        let ended = false;
        const controller = await watch.watch(watchPath, query, callback, (err) => {
          ended = true;
          this.current = false;
          done(err);
        });
        if (!ended && !this.closed) this.current = this.settled = true;
        return controller;
      },
    });
    // client-node waits ever longer (to 30 s) between a watch's normal end and the next: at most REOPEN_MS here.
    const delayFn = (ms: number): Promise<void> => sleep(Math.min(ms, REOPEN_MS));
    this.informer = new ListWatch(path, opened, () => listInPages(list, dropUnread), false, labelSelector, undefined, { delayFn });
    this.informer.on('add', (object) => this.file(object));
    this.informer.on('update', (object) => this.file(object));
    this.informer.on('delete', (object) => this.unfile(uidOf(object)));
    this.informer.on('error', (err: unknown) => {
      this.current = false;
      this.settled = true;
      if (this.closed) return;
      this.report(`the watch of ${what} broke; it is opened again`, err);
      setTimeout(() => void this.start(), REOPEN_MS).unref();
    });
  }

  start(): void {
    if (this.closed) return;
    this.informer.start().catch((err: unknown) => {
      this.settled = true;
      this.report(`the watch of ${this.what} could not start`, err);
    });
  }

  close(): void {
    this.closed = true;
    this.current = false;
    void this.informer.stop();
    for (const wake of this.waiters) wake();
  }

  /** Calls `handler` with each object as it is added, changed or deleted (after the copy has it). */
  on(verb: 'add' | 'update' | 'delete', handler: Handler<T>): void {
    this.informer.on(verb, handler);
  }

  /**
   * Whether the first list and watch are over: the copy was current once, or
   * the watch failed (then answers come from look-ups). An agent starting up is
   * not ready before: its first answers would all be look-ups.
   */
  get synced(): boolean {
    return this.settled;
  }

  /** How many changes the copy has taken: the same count, the same copy. */
  get changes(): number {
    return this.changeCount;
  }

  /** Whether the copy is current: its watch is open. */
  get answering(): boolean {
    return this.current;
  }

  /** The objects filed under `key` in `index`, or undefined when the copy is not current. */
  byIndex(index: string, key: string): T[] | undefined {
    if (!this.current) return undefined;
    return [...(this.indexes.get(index)?.get(key)?.values() ?? [])];
  }

  /** The keys `index` has, or undefined when the copy is not current. */
  keysOf(index: string): string[] | undefined {
    return this.current ? [...(this.indexes.get(index)?.keys() ?? [])] : undefined;
  }

  /** How many keys `index` has, or 0 when the copy is not current. */
  count(index: string): number {
    return this.current ? (this.indexes.get(index)?.size ?? 0) : 0;
  }

  /** Resolves at the copy's next change, or after `ms`. */
  nextChange(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        this.waiters.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.waiters.add(wake);
    });
  }

  private file(object: T): void {
    this.dropUnread(object);
    const uid = uidOf(object);
    this.unfile(uid, false);
    const places: Array<[string, string]> = [];
    for (const [index, keyOf] of Object.entries(this.keys)) {
      const key = keyOf(object);
      if (key === undefined) continue;
      let byKey = this.indexes.get(index);
      if (!byKey) this.indexes.set(index, (byKey = new Map()));
      let objects = byKey.get(key);
      if (!objects) byKey.set(key, (objects = new Map()));
      objects.set(uid, object);
      places.push([index, key]);
    }
    this.filed.set(uid, places);
    this.changed();
  }

  private unfile(uid: string, announce = true): void {
    for (const [index, key] of this.filed.get(uid) ?? []) {
      const objects = this.indexes.get(index)?.get(key);
      objects?.delete(uid);
      if (objects?.size === 0) this.indexes.get(index)?.delete(key);
    }
    this.filed.delete(uid);
    if (announce) this.changed();
  }

  private changed(): void {
    this.changeCount++;
    for (const wake of this.waiters) wake();
  }
}

/**
 * Every object of a list, read a page at a time (LIST_PAGE): at 5,000 bots one answer is some 40 MB of JSON, parsed whole
 * beside the copy it replaces, a peak the agent's memory kept long after (docs/performance.md, "Kubernetes at 5,000
 * bots"). Pages of one list come from one snapshot of the API server's; the list's resourceVersion is the last page's.
 */
async function listInPages<T extends KubernetesObject>(page: ListPage<T>, dropUnread: (object: T) => void): Promise<KubernetesListObject<T>> {
  const items: T[] = [];
  let from: string | undefined;
  for (;;) {
    const answer = await page(from);
    for (const object of answer.items) {
      dropUnread(object);
      items.push(object);
    }
    from = answer.metadata?._continue;
    if (!from) return { ...answer, items };
  }
}

/**
 * Who wrote which field, a few KB an object: never read here, and kept for every bot's Deployment and pod (the
 * informer's copy is this same object). docs/performance.md, "Kubernetes at 5,000 bots".
 */
function dropManagedFields(object: KubernetesObject): void {
  if (object.metadata) unset(object.metadata, 'managedFields');
}

/**
 * A watched pod without what only the kubelet reads of it: its volumes and their mounts (the service account's
 * token volume in every pod), tolerations (two the API server adds to every pod), its owner, and each container's
 * command, arguments and environment. Kept: names, labels, annotations, node, probes, resources, status. A third
 * of a bot's pod (docs/performance.md, "Kubernetes at 5,000 bots"); never sent back (pods are only read and deleted).
 */
export function dropUnreadOfPod(pod: V1Pod): void {
  dropManagedFields(pod);
  if (pod.metadata) unset(pod.metadata, 'ownerReferences');
  const spec = pod.spec;
  if (!spec) return;
  unset(spec, 'volumes', 'tolerations');
  for (const container of [...(spec.containers ?? []), ...(spec.initContainers ?? [])]) {
    unset(container, 'volumeMounts', 'command', 'args', 'env', 'envFrom');
  }
}

/**
 * Lets go of what `keys` hold, the keys left in place: `delete` turns an object into a dictionary, larger than the
 * fields it dropped (a watched pod's metadata, spec and container: 15 MB of 5,000 pods' and Deployments' copies,
 * docs/performance.md, "Kubernetes at 5,000 bots"). JSON leaves an undefined field out, as a deleted one.
 */
function unset<T extends object>(object: T, ...keys: Array<keyof T>): void {
  for (const key of keys) if (object[key] !== undefined) object[key] = undefined as T[keyof T];
}

function uidOf(object: KubernetesObject): string {
  return object.metadata?.uid ?? `${object.metadata?.namespace}/${object.metadata?.name}`;
}
