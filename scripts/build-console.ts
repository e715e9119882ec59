// Builds the operator's console (console/) into dist/console: one script and one style sheet, minified,
// named by a hash of their content (the agent serves them cached for good), and the page that loads them.
// Prints each file's size, raw and gzipped: the whole console is to stay under 150 KB gzipped.
import { createHash } from 'node:crypto';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';

const source = 'console';
const out = 'dist/console';
const result = await build({
  entryPoints: [join(source, 'main.tsx')],
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['chrome120', 'firefox120', 'safari17'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  tsconfig: join(source, 'tsconfig.json'),
  write: false,
  outdir: 'out',
  entryNames: 'app',
  logLevel: 'warning',
});
await rm(out, { recursive: true, force: true });
await mkdir(join(out, 'assets'), { recursive: true });
const names: Record<string, string> = {};
let total = 0;
for (const file of result.outputFiles) {
  const extension = basename(file.path).split('.').pop()!;
  const hash = createHash('sha256').update(file.contents).digest('base64url').slice(0, 12);
  const name = `app.${hash}.${extension}`;
  names[extension] = name;
  await writeFile(join(out, 'assets', name), file.contents);
  const gzipped = gzipSync(file.contents, { level: 9 }).length;
  total += gzipped;
  console.log(`console: ${name} ${(file.contents.length / 1024).toFixed(1)} KB, ${(gzipped / 1024).toFixed(1)} KB gzipped`);
}
const page = (await readFile(join(source, 'index.html'), 'utf8')).replace('{{script}}', `/console/${names.js}`).replace('{{style}}', `/console/${names.css}`);
await writeFile(join(out, 'index.html'), page);
total += gzipSync(page, { level: 9 }).length;
console.log(`console: all of it ${(total / 1024).toFixed(1)} KB gzipped`);
