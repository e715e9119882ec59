import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

/** One file of the console, held in memory as built, and gzipped once. */
export interface ConsoleAsset {
  readonly type: string;
  readonly body: Buffer;
  readonly gzipped: Buffer;
}

/** The console as built (`npm run build`: scripts/build-console.ts): its page, and its assets by name. */
export interface ConsoleFiles {
  readonly page: ConsoleAsset;
  readonly assets: ReadonlyMap<string, ConsoleAsset>;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
};

function asset(path: string): ConsoleAsset {
  const body = readFileSync(path);
  return { type: TYPES[extname(path)] ?? 'application/octet-stream', body, gzipped: gzipSync(body, { level: 9 }) };
}

/**
 * Where the built console is, dist/console, as seen from this module: bundled into dist/agent.mjs,
 * compiled to dist/http/, or run from its source in src/http/ (the tests).
 */
export function consoleFolder(): string | undefined {
  const places = ['./console/', '../console/', '../../dist/console/'].map((place) => new URL(place, import.meta.url));
  // Only a built console has its assets beside its page.
  return places.map((place) => fileURLToPath(place)).find((folder) => existsSync(join(folder, 'index.html')) && existsSync(join(folder, 'assets')));
}

/** Reads the built console from `folder`; undefined when it was not built. */
export function loadConsole(folder: string | undefined = consoleFolder()): ConsoleFiles | undefined {
  if (folder === undefined || !existsSync(join(folder, 'index.html'))) return undefined;
  const assetFolder = join(folder, 'assets');
  const names = existsSync(assetFolder) ? readdirSync(assetFolder) : [];
  return {
    page: asset(join(folder, 'index.html')),
    assets: new Map(names.map((name) => [name, asset(join(assetFolder, name))])),
  };
}
