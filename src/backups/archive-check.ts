import { createHash } from 'node:crypto';
import type { Hash } from 'node:crypto';
import { posix } from 'node:path';
import { Transform } from 'node:stream';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { extract } from 'tar-stream';
import type { Header } from 'tar-stream';

/** What a folder's archive is refused for before anything of it is written (docs/api.md §20). */
export class ArchiveRefused extends Error {}

/** An archive read through: the SHA-256 of its bytes as given, and the digest of the tree it unpacks to. */
export interface ArchiveReading {
  readonly sha256: string;
  readonly treeDigest: string;
  readonly unpackedBytes: number;
  readonly entries: number;
}

const ENTRY_TYPES = new Set(['file', 'contiguous-file', 'directory', 'symlink', 'link']);
const TREE_MODULUS = 1n << 256n;
/** The most entries a folder's archive may hold: each one's name is kept while it is read (for hard links). */
export const MAX_ENTRIES = 200_000;

/**
 * Reads a folder's archive through once, as restores take it (docs/api.md §20): `path` is the folder inside the
 * container, and the archive's entries are under its last name (`data/...` for `/data`), as the engine's archive
 * API writes them. Refused (ArchiveRefused) for an entry that climbs out of the folder (`..`, an absolute name, a
 * name outside it), a link that points out of it, a device or a pipe, more than `limitBytes` unpacked, or more
 * than MAX_ENTRIES entries.
 *
 * The tree's digest covers each entry's name, kind, permissions, size, content (or link target), the folder's own
 * entry left out, in any order: the sum of each entry's SHA-256, modulo 2^256. A tar walks a folder in the order
 * its file system lists it (a busybox tar on Kubernetes does), which a copy unpacked again need not keep; and a
 * hard link counts as the file it links to, whichever of the two names came first.
 */
export async function readArchive(
  source: Readable,
  path: string,
  { gzipped, limitBytes, maxEntries = MAX_ENTRIES }: { gzipped: boolean; limitBytes: number; maxEntries?: number },
): Promise<ArchiveReading> {
  const base = posix.basename(path);
  const parent = posix.dirname(path);
  const whole = createHash('sha256');
  let tree = 0n;
  /** Every entry's name; a file's with its size and content's digest, which a hard link to it counts as its own. */
  const seen = new Map<string, string | undefined>();
  let unpackedBytes = 0;
  let entries = 0;
  const tap = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      whole.update(chunk);
      done(null, chunk);
    },
  });
  const entriesOf = extract();
  const read = pipeline(source, tap, ...(gzipped ? [createGunzip()] : []), entriesOf);
  try {
    for await (const entry of entriesOf) {
      const header = entry.header;
      const name = entryName(header.name, base);
      if (!ENTRY_TYPES.has(header.type ?? 'file')) throw new ArchiveRefused(`its entry ${JSON.stringify(header.name)} is a ${header.type ?? 'file'}: only files, folders and links are restored`);
      if (header.type === 'symlink') linkInside(header, name, path, parent);
      if (header.type === 'link' && !seen.has(entryName(header.linkname ?? '', base))) {
        throw new ArchiveRefused(`its entry ${JSON.stringify(header.name)} is a hard link to ${JSON.stringify(header.linkname)}, which is not an earlier entry of the folder`);
      }
      unpackedBytes += header.size ?? 0;
      if (unpackedBytes > limitBytes) throw new ArchiveRefused(`it unpacks to more than ${limitBytes} bytes, the most the folder may hold`);
      if (++entries > maxEntries) throw new ArchiveRefused(`it holds more than ${maxEntries} entries, the most a folder's archive may`);
      const content = isFile(header) ? createHash('sha256') : undefined;
      for await (const chunk of entry as AsyncIterable<Buffer>) content?.update(chunk);
      const file = content ? `${header.size ?? 0} ${content.digest('hex')}` : header.type === 'link' ? seen.get(entryName(header.linkname ?? '', base)) : undefined;
      seen.set(name, file);
      const kind = file === undefined ? `${header.type} ${header.size ?? 0} ${JSON.stringify(header.linkname ?? '')}` : `file ${file}`;
      if (name !== base) tree = (tree + BigInt(`0x${createHash('sha256').update(`${JSON.stringify(name)} ${(header.mode ?? 0) & 0o7777} ${kind}`).digest('hex')}`)) % TREE_MODULUS;
    }
    await read;
  } catch (err) {
    entriesOf.destroy();
    await read.catch(() => undefined);
    if (err instanceof ArchiveRefused) throw err;
    throw new ArchiveRefused(`it cannot be read as a ${gzipped ? 'gzip-compressed ' : ''}tar: ${(err as Error).message}`, { cause: err });
  }
  if (entries === 0) throw new ArchiveRefused('it holds no entry of the folder');
  return { sha256: hex(whole), treeDigest: tree.toString(16).padStart(64, '0'), unpackedBytes, entries };
}

function hex(hash: Hash): string {
  return hash.digest('hex');
}

function isFile(header: Header): boolean {
  return header.type === 'file' || header.type === 'contiguous-file' || header.type === undefined || header.type === null;
}

/** The entry's name, plain (no trailing `/`); refused unless it is the folder or under it. */
function entryName(raw: string, base: string): string {
  const name = raw.replace(/\/+$/, '');
  const parts = name.split('/');
  if (name.startsWith('/') || parts.some((part) => part === '..' || part === '.' || part === '') || parts[0] !== base) {
    throw new ArchiveRefused(`its entry ${JSON.stringify(raw.slice(0, 200))} is not inside the folder ${base}`);
  }
  return name;
}

/** A symbolic link must point inside the folder, where the container would follow it. */
function linkInside(header: Header, name: string, path: string, parent: string): void {
  const target = header.linkname ?? '';
  const resolved = target.startsWith('/') ? posix.normalize(target) : posix.join(parent, posix.dirname(name), target);
  if (resolved !== path && !resolved.startsWith(`${path}/`)) {
    throw new ArchiveRefused(`its entry ${JSON.stringify(header.name)} links to ${JSON.stringify(target.slice(0, 200))}, outside the folder ${path}`);
  }
}
