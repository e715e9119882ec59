import { createHash } from 'node:crypto';

/** A folder of a bot whose files outlive its container (docs/api.md §19). */
export interface BotDataFolder {
  /** Absolute, inside the container. */
  readonly path: string;
  /** What the bot may use, in MiB; undefined: no bound but the disk's. */
  readonly sizeMb?: number | undefined;
}

/** A folder's short name on the runtime (a Docker volume's suffix, a Kubernetes claim's subPath): 12 hex digits of its path's SHA-256. */
export function dataFolderKey(path: string): string {
  return createHash('sha256').update(path).digest('hex').slice(0, 12);
}

/** Folders one bot may keep: each is a volume of its own. */
export const MAX_DATA_FOLDERS = 4;
/** The largest size_mb a create may ask for: 1 TiB. */
export const MAX_DATA_SIZE_MB = 1_048_576;
const MAX_PATH_LENGTH = 255;

/** Folders of the container's runtime, never a bot's data. */
const SYSTEM_FOLDERS = ['/proc', '/sys', '/dev'];

/**
 * What is wrong with a data folder's path (said after the field's name), or undefined when it may be one: absolute,
 * written plainly (no `.`, `..`, `//` or trailing `/`, so that two spellings never name one folder), not `/`, not
 * under /proc, /sys or /dev, and free of what the engine reads as separators in a mount (`:` and `,`).
 */
export function dataPathProblem(path: string): string | undefined {
  if (!path.startsWith('/')) return 'must be an absolute path, e.g. /data';
  if (path.length > MAX_PATH_LENGTH) return `must be at most ${MAX_PATH_LENGTH} characters`;
  if (path === '/') return 'must not be /: the whole file system cannot be kept';
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f:,]/.test(path)) return 'must not hold control characters, : or ,';
  if (path.endsWith('/') || path.split('/').slice(1).some((part) => part === '' || part === '.' || part === '..')) {
    return 'must be written plainly: no trailing /, no //, no . or .. parts';
  }
  const system = SYSTEM_FOLDERS.find((folder) => path === folder || path.startsWith(`${folder}/`));
  if (system !== undefined) return `must not be under ${system}, which the runtime owns`;
  return undefined;
}

/** The first pair of folders that repeat or hold one another ("/a and /a/b"), or undefined when none do. */
export function overlappingFolders(paths: readonly string[]): string | undefined {
  for (const [i, a] of paths.entries()) {
    for (const b of paths.slice(i + 1)) {
      if (a === b || b.startsWith(`${a}/`) || a.startsWith(`${b}/`)) return a === b ? `${a} twice` : `${a} and ${b}`;
    }
  }
  return undefined;
}
