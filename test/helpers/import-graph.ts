import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

/** Which parts of `src/` import which: a part is a folder below src, or a file directly in it. */
export type PartGraph = Map<string, Set<string>>;

/** The part a file of src belongs to: `http` for src/http/x.ts, `config.ts` for src/config.ts. */
export function partOf(fileInSrc: string): string {
  const [first, ...rest] = fileInSrc.split('/');
  return rest.length === 0 ? (first ?? fileInSrc) : `${first}/`;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** The graph of `src`, from every import, export-from and dynamic import TypeScript's own pre-processor finds. */
export function importGraph(src: string): PartGraph {
  const graph: PartGraph = new Map();
  for (const file of sourceFiles(src)) {
    const from = partOf(relative(src, file));
    const edges = graph.get(from) ?? new Set<string>();
    graph.set(from, edges);
    for (const { fileName } of ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles) {
      if (!fileName.startsWith('.')) continue;
      const target = relative(src, resolve(dirname(file), fileName));
      if (target.startsWith('..')) throw new Error(`${relative(src, file)} imports ${fileName}, outside src`);
      const to = partOf(target.replace(/\.js$/, '.ts'));
      if (to !== from) edges.add(to);
    }
  }
  return graph;
}

/** Every cycle among the parts, each as the path that closes it (`a -> b -> a`); none when the arrows only run one way. */
export function cyclesOf(graph: PartGraph): string[] {
  const cycles: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (part: string): void => {
    if (state.get(part) === 'done') return;
    if (state.get(part) === 'open') {
      cycles.push([...path.slice(path.indexOf(part)), part].join(' -> '));
      return;
    }
    state.set(part, 'open');
    path.push(part);
    for (const next of graph.get(part) ?? []) visit(next);
    path.pop();
    state.set(part, 'done');
  };
  for (const part of [...graph.keys()].sort()) visit(part);
  return cycles;
}

/**
 * The packages loaded with `entry`: those its static imports reach, through src's own files, each with the file that
 * first names it. Type-only imports load nothing, and a dynamic `import()` loads only when it runs: neither counts.
 */
export function packagesLoadedWith(entry: string): Map<string, string> {
  const packages = new Map<string, string>();
  const seen = new Set<string>();
  const visit = (file: string): void => {
    if (seen.has(file)) return;
    seen.add(file);
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest);
    for (const statement of source.statements) {
      const loads =
        (ts.isImportDeclaration(statement) && !statement.importClause?.isTypeOnly) ||
        (ts.isExportDeclaration(statement) && statement.moduleSpecifier !== undefined && !statement.isTypeOnly);
      if (!loads || !ts.isStringLiteral(statement.moduleSpecifier!)) continue;
      const specifier = statement.moduleSpecifier.text;
      if (specifier.startsWith('.')) visit(resolve(dirname(file), specifier.replace(/\.js$/, '.ts')));
      else {
        const name = specifier.split('/').slice(0, specifier.startsWith('@') ? 2 : 1).join('/');
        if (!packages.has(name)) packages.set(name, file);
      }
    }
  };
  visit(entry);
  return packages;
}
