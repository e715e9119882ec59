import { existsSync, readFileSync, writeFileSync } from 'node:fs';

/** The sections of BENCHMARKS.md that a script of their own writes (npm run bench:<name>); npm run bench keeps them. */
export const OWN_SECTIONS = ['outage', 'console', 'health', 'ab', 'deploys', 'fleet', 'kube-scale', 'docker-scale', 'backups', 'move', 'log-history', 'history-writes'] as const;
export type SectionName = (typeof OWN_SECTIONS)[number];

const markers = (name: SectionName) => ({ begin: `<!-- bench:${name} -->`, end: `<!-- /bench:${name} -->` });

function current(): string {
  return existsSync('BENCHMARKS.md') ? readFileSync('BENCHMARKS.md', 'utf8') : '';
}

/** The named section of the BENCHMARKS.md there is now, with its markers; empty when there is none. */
export function section(name: SectionName, text = current()): string {
  const { begin, end } = markers(name);
  const from = text.indexOf(begin);
  const to = text.indexOf(end);
  return from >= 0 && to > from ? text.slice(from, to + end.length) : '';
}

/** Every section a script of its own wrote, to be kept by whatever rewrites the rest of the file. */
export function ownSections(): string[] {
  const text = current();
  return OWN_SECTIONS.map((name) => section(name, text)).filter((kept) => kept !== '');
}

/** Writes the named section, `body` between its markers, in place of the one there is, else at the end. */
export function writeSection(name: SectionName, body: string): string {
  const { begin, end } = markers(name);
  const written = `${begin}\n${body.trim()}\n${end}`;
  const text = current() || '# Benchmarks\n';
  const kept = section(name, text);
  writeFileSync('BENCHMARKS.md', kept ? text.replace(kept, written) : `${text.trimEnd()}\n\n${written}\n`);
  return written;
}
