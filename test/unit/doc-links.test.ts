import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';

// The README is short and sends its reader to docs/: every link between them, and to the files they name, must
// land, down to the heading an anchor names.
const root = fileURLToPath(new URL('../../', import.meta.url));
const pages = ['README.md', 'BENCHMARKS.md', 'clients/python/README.md', ...readdirSync(join(root, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`)];

/** GitHub's anchor for a heading: lower case, punctuation dropped, each space a hyphen. */
export function anchorOf(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
}

/** The anchors of a Markdown file's headings (outside fenced code). */
function anchorsIn(text: string): Set<string> {
  const anchors = new Set<string>();
  let fenced = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const heading = /^#+\s+(.*)$/.exec(line);
    if (heading && !fenced) anchors.add(anchorOf(heading[1]!));
  }
  return anchors;
}

/** The targets of a Markdown file's links and images, outside fenced code. */
function linksIn(text: string): string[] {
  const prose = text.replace(/^```[\s\S]*?^```/gm, '');
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map((match) => match[1]!);
}

test('anchors are made as GitHub makes them', (t) => {
  t.is(anchorOf('Several agents, one history (PostgreSQL)'), 'several-agents-one-history-postgresql');
  t.is(anchorOf('Self restart: `POST /api/bots/self/restart`'), 'self-restart-post-apibotsselfrestart');
});

test('the README reads in a few minutes: what it is, the two commands, the configuration, where to go next', (t) => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  t.true(readme.split('\n').length <= 150, `${readme.split('\n').length} lines`);
  for (const heading of ['## The two commands', '## Configuration', '## Where to go next']) t.true(readme.includes(`\n${heading}\n`), heading);
});

test('every link of the README and docs/ lands: on a file that exists, and on a heading it has', (t) => {
  const broken: string[] = [];
  let checked = 0;
  for (const page of pages) {
    for (const target of linksIn(readFileSync(join(root, page), 'utf8'))) {
      if (/^[a-z]+:/.test(target)) continue;
      checked += 1;
      const [path = '', anchor] = target.split('#');
      const file = path === '' ? join(root, page) : join(root, dirname(page), path);
      if (!existsSync(file)) broken.push(`${page}: ${target} (no ${relative(root, file)})`);
      else if (anchor !== undefined && !anchorsIn(readFileSync(file, 'utf8')).has(anchor)) broken.push(`${page}: ${target} (no such heading)`);
    }
  }
  t.true(checked >= 20, `only ${checked} links checked`);
  t.deepEqual(broken, []);
});
