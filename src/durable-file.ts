import { open, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { PRIVATE_FILE_MODE } from './private-files.js';

/** Writes a new file whole and on disk before it is used: its owner's alone, made new (`wx`). */
export async function writeDurably(path: string, data: string | Uint8Array): Promise<void> {
  const handle = await open(path, 'wx', PRIVATE_FILE_MODE);
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Makes a folder's entries (a file renamed into it) last through a power cut. */
export async function syncDir(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Puts `data` at `path` in place of what was there: written whole under another name, then renamed over it,
 * so that a SIGKILL or a power cut at any byte leaves the old file or the new one, never a torn one.
 */
export async function replaceDurably(path: string, data: string | Uint8Array): Promise<void> {
  const next = `${path}.next`;
  await rm(next, { force: true });
  await writeDurably(next, data);
  await rename(next, path);
  await syncDir(dirname(path));
}
