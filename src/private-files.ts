import { chmodSync, closeSync, mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';

/** What the agent keeps under AGENT_DATA_DIR (bot log lines, session nonces, signing keys) is its owner's alone (docs/operating.md). */
export const PRIVATE_FILE_MODE = 0o600;
export const PRIVATE_DIR_MODE = 0o700;

/**
 * Makes `dir` (and its parents) if missing, and narrows it to its owner: a folder an earlier version made 0755
 * included. A folder the agent does not own (a volume's mount point, given to it through its group) is left as
 * the operator made it; the files in it are still the agent's alone.
 */
export function privateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  try {
    chmodSync(dir, PRIVATE_DIR_MODE);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') throw err;
  }
}

/** Makes the file, empty, as its owner's alone when it is missing, and narrows it when it is not. */
export function privateFile(path: string): string {
  closeSync(openSync(path, 'a', PRIVATE_FILE_MODE));
  chmodSync(path, PRIVATE_FILE_MODE);
  return path;
}

/** Narrows those of the files `names` in `dir` that exist (an earlier version made them readable to all) to their owner. */
export function narrowFiles(dir: string, names: readonly string[]): void {
  for (const name of names) {
    try {
      chmodSync(join(dir, name), PRIVATE_FILE_MODE);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
}
