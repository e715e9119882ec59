import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { readBackupStores } from '../../src/backups/backup-stores.js';
import { ConfigError } from '../../src/config.js';

// AGENT_BACKUP_STORES (docs/api.md §20): a file that is not one stops the agent at start, saying why, never a key.
const dir = mkdtempSync(join(tmpdir(), 'bot-agent-stores-file-'));
test.after.always(() => rmSync(dir, { recursive: true, force: true }));

function fileOf(content: unknown): string {
  const path = join(dir, `${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

const store = { name: 'offsite', endpoint: 'http://127.0.0.1:9000', bucket: 'bots', access_key_id: 'AKIA', secret_access_key: 'secret-never-shown' };

test('a store file is read with its defaults', (t) => {
  t.like(readBackupStores(fileOf({ stores: [store] })), [{ ...store, prefix: '', region: 'us-east-1', force_path_style: true, timeout_s: 30 }]);
  t.like(readBackupStores(fileOf({ stores: [{ name: 'env-keys', endpoint: 'https://s3.example.com', bucket: 'b', prefix: 'agent-1/' }] })), [{ access_key_id: undefined }]);
});

test('a file that is not a store file is a ConfigError naming what is wrong, never a key', (t) => {
  const refusals: Array<[unknown, RegExp]> = [
    ['{not json', /cannot read .* as JSON/],
    [{ stores: [{ ...store, colour: 'red' }] }, /a store takes name, endpoint/],
    [{ stores: [store, store] }, /each store needs a name of its own/],
    [{ stores: [{ ...store, secret_access_key: undefined }] }, /access_key_id and secret_access_key go together/],
    [{ stores: [{ ...store, endpoint: 'ftp://x' }] }, /endpoint must be an http\(s\) URL/],
    [{ stores: [{ ...store, name: 'Off Site' }] }, /name must be 1 to 32/],
    [{ stores: [{ ...store, prefix: '/abs' }] }, /prefix must end with/],
    [{ stores: [{ ...store, timeout_s: 0 }] }, /timeout_s/],
    [{ other: [] }, /the file takes "stores"|stores is a required field/],
  ];
  for (const [content, message] of refusals) {
    const err = t.throws(() => readBackupStores(fileOf(content)), { instanceOf: ConfigError }, JSON.stringify(content));
    t.regex(err?.message ?? '', message);
    t.false(err?.message.includes('secret-never-shown'), 'a key was said');
  }
});
