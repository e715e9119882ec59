import { readFileSync } from 'node:fs';
import type { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import { array, boolean, object, string, ValidationError } from 'yup';
import { ConfigError } from '../config.js';
import { wholeNumber } from '../whole-number.js';
import { BACKUP_ID, manifestOf, newestFirst, STORE_NAME } from './backup-folder.js';
import type { Backup } from './backup-folder.js';

/** How long a store may be silent on one request before the copy or read fails, unless its `timeout_s` says (docs/api.md §20). */
const DEFAULT_TIMEOUT_S = 30;
const CONNECT_TIMEOUT_MS = 5_000;
/** Parts of 5 MiB (the least S3 takes), two in flight: what one upload holds in memory, however large the archive. */
const PART_BYTES = 5 * 1024 * 1024;
const PARTS_AT_ONCE = 2;
/** The most backups of a bot a store's listing reads. */
const LISTED_AT_MOST = 200;
/**
 * How old the newest archive of a backup without a manifest must be before a listing removes it: left by a copy or
 * a removal an agent's death cut short (docs/api.md §20). A copy under way writes its parts more often than that.
 */
const ORPHANED_AFTER_MS = 6 * 3_600_000;

const storesFile = object({
  stores: array(
    object({
      name: string().required().matches(STORE_NAME, '${path} must be 1 to 32 of a-z, 0-9 and -'),
      endpoint: string()
        .required()
        .test('url', '${path} must be an http(s) URL', (value) => value !== undefined && /^https?:\/\//.test(value) && URL.canParse(value)),
      bucket: string().required(),
      prefix: string().default('').matches(/^$|^[^/].*\/$/, '${path} must end with / and not begin with one'),
      region: string().default('us-east-1'),
      force_path_style: boolean().default(true),
      timeout_s: wholeNumber('timeout_s', 1, 600).default(DEFAULT_TIMEOUT_S),
      access_key_id: string(),
      secret_access_key: string(),
    })
      .noUnknown('a store takes name, endpoint, bucket, prefix, region, force_path_style, timeout_s, access_key_id and secret_access_key')
      .test('keys', 'access_key_id and secret_access_key go together', (store) => (store.access_key_id === undefined) === (store.secret_access_key === undefined)),
  )
    .required()
    .max(16, 'at most 16 stores')
    .test('names', 'each store needs a name of its own', (stores) => new Set(stores?.map((store) => store.name)).size === (stores?.length ?? 0)),
}).noUnknown('the file takes "stores"');

interface Store {
  readonly bucket: string;
  readonly prefix: string;
  readonly client: S3Client;
}

/**
 * The AWS SDK, loaded at a store's first use: an agent that names no store (or never copies to one) does not carry
 * it, some 4 MB of heap and 8 MB resident.
 */
let loaded: Promise<typeof import('@aws-sdk/client-s3') & typeof import('@aws-sdk/lib-storage')> | undefined;
const sdk = () => (loaded ??= Promise.all([import('@aws-sdk/client-s3'), import('@aws-sdk/lib-storage')]).then(([s3, storage]) => ({ ...s3, ...storage })));

/**
 * The S3-compatible stores backups are copied to (docs/api.md §20), read from AGENT_BACKUP_STORES: a backup's
 * archives, then its manifest last, under `<prefix><bot_id>/<backup_id>/`. A store lists a backup only once its
 * manifest is there, so one whose copy was cut short is never listed. Keys come from the file or, where it names
 * none, from the environment as the AWS SDK reads it (AWS_ACCESS_KEY_ID...); they are never answered or logged.
 */
export class BackupStores {
  private readonly configs = new Map<string, StoreConfig>();
  private readonly stores = new Map<string, Promise<Store>>();

  constructor(
    configs: readonly StoreConfig[],
    private readonly orphanedAfterMs = ORPHANED_AFTER_MS,
  ) {
    for (const config of configs) this.configs.set(config.name, config);
  }

  names(): string[] {
    return [...this.configs.keys()];
  }

  has(name: string): boolean {
    return this.configs.has(name);
  }

  /** Copies the backup: each archive streamed in parts, then its manifest. One cut short leaves nothing listed, and what it wrote is removed where it can be. */
  async put(name: string, backup: Backup, open: (file: string) => Readable): Promise<void> {
    const store = await this.store(name);
    const { DeleteObjectsCommand, PutObjectCommand, Upload } = await sdk();
    const dir = `${store.prefix}${backup.bot_id}/${backup.id}/`;
    try {
      for (const folder of backup.folders) {
        await new Upload({ client: store.client, params: { Bucket: store.bucket, Key: `${dir}${folder.file}`, Body: open(folder.file), ContentType: 'application/gzip' }, partSize: PART_BYTES, queueSize: PARTS_AT_ONCE }).done();
      }
      await store.client.send(new PutObjectCommand({ Bucket: store.bucket, Key: `${dir}backup.json`, Body: `${JSON.stringify(backup)}\n`, ContentType: 'application/json' }));
    } catch (err) {
      const keys = backup.folders.map((folder) => ({ Key: `${dir}${folder.file}` }));
      await store.client.send(new DeleteObjectsCommand({ Bucket: store.bucket, Delete: { Objects: keys, Quiet: true } })).catch(() => undefined);
      throw err;
    }
  }

  /**
   * The bot's backups in the store, newest first: those whose manifest is there. The archives of one without a
   * manifest, none written for ORPHANED_AFTER_MS, are removed on the way: a copy or a removal cut short left them.
   */
  async list(name: string, botId: string): Promise<Backup[]> {
    const store = await this.store(name);
    const { ListObjectsV2Command } = await sdk();
    const listed = await store.client.send(new ListObjectsV2Command({ Bucket: store.bucket, Prefix: `${store.prefix}${botId}/`, Delimiter: '/', MaxKeys: 1000 }));
    const ids = (listed.CommonPrefixes ?? [])
      .map((common) => (common.Prefix ?? '').slice(`${store.prefix}${botId}/`.length, -1))
      .filter((id) => BACKUP_ID.test(id))
      .sort()
      .reverse()
      .slice(0, LISTED_AT_MOST);
    const backups: Backup[] = [];
    for (const id of ids) {
      const backup = await this.manifest(name, botId, id);
      if (backup) backups.push(backup);
      else await this.removeIfOrphaned(store, `${store.prefix}${botId}/${id}/`);
    }
    return backups.sort(newestFirst);
  }

  /** Removes what is under `dir` (a backup without a manifest) once nothing there has been written for a while. */
  private async removeIfOrphaned(store: Store, dir: string): Promise<void> {
    const { DeleteObjectsCommand, ListObjectsV2Command } = await sdk();
    const listed = await store.client.send(new ListObjectsV2Command({ Bucket: store.bucket, Prefix: dir, MaxKeys: 1000 }));
    const objects = listed.Contents ?? [];
    const newest = Math.max(0, ...objects.map((object) => object.LastModified?.getTime() ?? Date.now()));
    if (objects.length === 0 || Date.now() - newest < this.orphanedAfterMs) return;
    await store.client.send(new DeleteObjectsCommand({ Bucket: store.bucket, Delete: { Objects: objects.map((object) => ({ Key: object.Key! })), Quiet: true } }));
  }

  /** The backup's manifest in the store, or undefined when it holds none (a copy cut short, or none made). */
  async manifest(name: string, botId: string, id: string): Promise<Backup | undefined> {
    if (!BACKUP_ID.test(id)) return undefined;
    try {
      const text = await (await this.object(name, `${botId}/${id}/backup.json`)).transformToString();
      return manifestOf(JSON.parse(text), botId, id);
    } catch (err) {
      if ((err as { name?: string }).name === 'NoSuchKey') return undefined;
      throw err;
    }
  }

  /** Removes the backup from the store: its manifest first, so that a removal cut short leaves nothing listed; then its archives. */
  async remove(name: string, backup: Backup): Promise<void> {
    const store = await this.store(name);
    const { DeleteObjectCommand, DeleteObjectsCommand } = await sdk();
    const dir = `${store.prefix}${backup.bot_id}/${backup.id}/`;
    await store.client.send(new DeleteObjectCommand({ Bucket: store.bucket, Key: `${dir}backup.json` }));
    const keys = backup.folders.map((folder) => ({ Key: `${dir}${folder.file}` }));
    if (keys.length > 0) await store.client.send(new DeleteObjectsCommand({ Bucket: store.bucket, Delete: { Objects: keys, Quiet: true } }));
  }

  /** One archive of a backup in the store, streamed. */
  async open(name: string, backup: Backup, file: string): Promise<Readable> {
    return (await this.object(name, `${backup.bot_id}/${backup.id}/${file}`)) as unknown as Readable;
  }

  private async object(name: string, key: string) {
    const store = await this.store(name);
    const { GetObjectCommand } = await sdk();
    const answer = await store.client.send(new GetObjectCommand({ Bucket: store.bucket, Key: `${store.prefix}${key}` }));
    if (!answer.Body) throw new Error(`the store answered no body for ${key}`);
    return answer.Body as Readable & { transformToString(): Promise<string> };
  }

  /** The store's client, made at its first use. */
  private store(name: string): Promise<Store> {
    const config = this.configs.get(name);
    if (!config) return Promise.reject(new Error(`no backup store ${name}`));
    let store = this.stores.get(name);
    if (!store) this.stores.set(name, (store = storeOf(config)));
    return store;
  }

  close(): void {
    // A store whose client could not be made has none to close.
    for (const store of this.stores.values()) void store.then((made) => made.client.destroy(), () => undefined);
  }
}

export type StoreConfig = ReturnType<typeof storesFile.validateSync>['stores'][number];

async function storeOf(config: StoreConfig): Promise<Store> {
  const { S3Client } = await sdk();
  const client = new S3Client({
    endpoint: config.endpoint,
    region: config.region,
    forcePathStyle: config.force_path_style,
    ...(config.access_key_id === undefined ? {} : { credentials: { accessKeyId: config.access_key_id, secretAccessKey: config.secret_access_key ?? '' } }),
    requestHandler: { requestTimeout: config.timeout_s * 1000, connectionTimeout: Math.min(CONNECT_TIMEOUT_MS, config.timeout_s * 1000), throwOnRequestTimeout: true },
    maxAttempts: 2,
  });
  return { bucket: config.bucket, prefix: config.prefix, client };
}

/** The stores of AGENT_BACKUP_STORES (a JSON file: `{"stores": [...]}`); ConfigError for a file that is not one. */
export function readBackupStores(path: string): StoreConfig[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new ConfigError(`AGENT_BACKUP_STORES: cannot read ${path} as JSON: ${(err as Error).message}`);
  }
  try {
    return storesFile.validateSync(parsed, { abortEarly: true, stripUnknown: false }).stores;
  } catch (err) {
    if (err instanceof ValidationError) throw new ConfigError(`AGENT_BACKUP_STORES: ${path}: ${err.errors.join('; ')}`);
    throw err;
  }
}
