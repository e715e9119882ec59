import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { gzipSync } from 'node:zlib';
import test from 'ava';
import { pack } from 'tar-stream';
import type { Header } from 'tar-stream';
import { ArchiveRefused, MAX_ENTRIES, readArchive } from '../../src/backups/archive-check.js';

// A folder's archive as a restore reads it before anything is written (docs/api.md §20).
type Entry = Partial<Header> & { name: string; body?: string };

async function tarOf(entries: Entry[]): Promise<Buffer> {
  const packed = pack();
  for (const { body, ...header } of entries) packed.entry(header, body ?? '');
  packed.finalize();
  return buffer(packed as unknown as Readable);
}

const good: Entry[] = [
  { name: 'data', type: 'directory', mode: 0o755 },
  { name: 'data/count', mode: 0o644, body: '41\n' },
  { name: 'data/sub', type: 'directory', mode: 0o700 },
  { name: 'data/sub/users.db', mode: 0o600, body: 'sqlite' },
  { name: 'data/latest', type: 'symlink', linkname: 'sub/users.db' },
  { name: 'data/abs', type: 'symlink', linkname: '/data/count' },
  { name: 'data/again', type: 'link', linkname: 'data/count' },
];

const read = async (entries: Entry[], limitBytes = 1 << 20) => readArchive(Readable.from(gzipSync(await tarOf(entries))), '/data', { gzipped: true, limitBytes });

test('a whole archive is read: its bytes\' SHA-256, a digest of its tree, its unpacked size', async (t) => {
  const bytes = gzipSync(await tarOf(good));
  const reading = await readArchive(Readable.from(bytes), '/data', { gzipped: true, limitBytes: 1 << 20 });
  t.is(reading.entries, good.length);
  t.is(reading.unpackedBytes, 3 + 6);
  const { createHash } = await import('node:crypto');
  t.is(reading.sha256, createHash('sha256').update(bytes).digest('hex'));
  // The same tree packed again (other times, the folder's own entry other) digests the same; one byte more does not.
  const again = await read(good.map((entry) => (entry.name === 'data' ? { ...entry, mode: 0o777, mtime: new Date(0) } : entry)));
  t.is(again.treeDigest, reading.treeDigest);
  const changed = await read(good.map((entry) => (entry.name === 'data/count' ? { ...entry, body: '42\n' } : entry)));
  t.not(changed.treeDigest, reading.treeDigest);
  const chmodded = await read(good.map((entry) => (entry.name === 'data/sub/users.db' ? { ...entry, mode: 0o644 } : entry)));
  t.not(chmodded.treeDigest, reading.treeDigest);
  // Another walk's order (a busybox tar lists a folder as its file system does), a hard link the other way round: the same tree.
  const [folder, count, sub, users, latest, abs] = good as [Entry, Entry, Entry, Entry, Entry, Entry];
  const reordered = await read([folder, sub, users, latest, abs, { name: 'data/again', mode: 0o644, body: '41\n' }, { name: 'data/count', type: 'link', linkname: 'data/again' }]);
  t.is(reordered.treeDigest, reading.treeDigest);
  t.not((await read([folder, count, sub, users, latest, abs])).treeDigest, reading.treeDigest, 'an entry fewer');
});

test('an entry that climbs out, an absolute one, one outside the folder, a link out of it, a device or a pipe is refused', async (t) => {
  const refusals: Array<[Entry, RegExp]> = [
    [{ name: 'data/../etc/passwd', body: 'x' }, /not inside the folder/],
    [{ name: '/etc/passwd', body: 'x' }, /not inside the folder/],
    [{ name: 'other/file', body: 'x' }, /not inside the folder/],
    [{ name: 'data/out', type: 'symlink', linkname: '../../etc/shadow' }, /links to .*outside the folder \/data/],
    [{ name: 'data/out', type: 'symlink', linkname: '/etc/shadow' }, /outside the folder/],
    [{ name: 'data/out', type: 'symlink', linkname: '/database' }, /outside the folder/],
    [{ name: 'data/hard', type: 'link', linkname: 'etc/passwd' }, /not inside the folder/],
    [{ name: 'data/hard', type: 'link', linkname: 'data/later' }, /not an earlier entry/],
    [{ name: 'data/null', type: 'character-device', devmajor: 1, devminor: 3 }, /character-device: only files, folders and links/],
    [{ name: 'data/sda', type: 'block-device', devmajor: 8, devminor: 0 }, /block-device/],
    [{ name: 'data/pipe', type: 'fifo' }, /fifo/],
  ];
  for (const [entry, message] of refusals) {
    const err = await t.throwsAsync(read([{ name: 'data', type: 'directory' }, entry]), { instanceOf: ArchiveRefused }, entry.name);
    t.regex(err?.message ?? '', message, entry.name);
  }
});

test('an archive that unpacks to more than the folder may hold is refused as it is read (a tar bomb), as is one that is no archive', async (t) => {
  const big = 'z'.repeat(600_000);
  const bomb = [{ name: 'data', type: 'directory' as const }, { name: 'data/a', body: big }, { name: 'data/b', body: big }];
  await t.throwsAsync(read(bomb, 1_000_000), { instanceOf: ArchiveRefused, message: /more than 1000000 bytes/ });
  t.is((await read(bomb, 1_200_000)).unpackedBytes, 1_200_000);
  const bytes = gzipSync(await tarOf(good));
  await t.throwsAsync(readArchive(Readable.from(bytes.subarray(0, bytes.length - 40)), '/data', { gzipped: true, limitBytes: 1 << 20 }), { instanceOf: ArchiveRefused, message: /cannot be read/ });
  await t.throwsAsync(readArchive(Readable.from(Buffer.from('not a tar at all')), '/data', { gzipped: true, limitBytes: 1 << 20 }), { instanceOf: ArchiveRefused });
  await t.throwsAsync(read([]), { instanceOf: ArchiveRefused, message: /no entry/ });
});

test('an archive of more entries than a folder may hold is refused (empty files: a bomb of names, not of bytes)', async (t) => {
  t.is(MAX_ENTRIES, 200_000);
  const many: Entry[] = [{ name: 'data', type: 'directory' }];
  for (let i = 0; i < 100; i++) many.push({ name: `data/${i}` });
  const bytes = gzipSync(await tarOf(many));
  await t.throwsAsync(readArchive(Readable.from(bytes), '/data', { gzipped: true, limitBytes: 1 << 20, maxEntries: 100 }), { instanceOf: ArchiveRefused, message: /more than 100 entries/ });
  t.is((await readArchive(Readable.from(bytes), '/data', { gzipped: true, limitBytes: 1 << 20, maxEntries: 101 })).entries, 101);
});
