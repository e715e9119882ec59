/**
 * What schemathesis said beside its failures: the blocks of its ERRORS section (a request that failed,
 * a crash of its own: a judge that crashed judged nothing) and the lines of its Warnings summary.
 * `excused` names, by a warning's title, the operations that warning may name and still be left out:
 * one that names any other operation stays.
 */
export function verdictsOf(output: string, excused: Record<string, readonly string[]> = {}): { errors: string[]; warnings: string[] } {
  const errors = /={3,} ERRORS ={3,}\n([\s\S]*?)(?:\n={3,} [A-Z]+ ={3,}|$)/.exec(output)?.[1] ?? '';
  const warnings = /^Warnings:\n((?:[ \t]+\S.*\n?)*)/m.exec(output)?.[1] ?? '';
  return {
    errors: errors.split(/^_{3,} /m).map((block) => block.trim()).filter((block) => block.length > 0),
    warnings: warnings
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line.length > 0)
      .filter((line) => {
        const title = /^⚠️\s*([^:]+):/u.exec(line)?.[1]?.trim();
        const allowed = title === undefined ? undefined : excused[title];
        if (allowed === undefined) return true;
        const named = warnedOperations(output, title!);
        return named.length === 0 || named.some((operation) => !allowed.includes(operation));
      }),
  };
}

/** The operations the WARNINGS section lists under the warning titled `title` (`- POST /api/admin/bots`). */
export function warnedOperations(output: string, title: string): string[] {
  const section = /={3,} WARNINGS ={3,}\n([\s\S]*?)(?:\n={3,} [A-Z]+ ={3,}|$)/.exec(output)?.[1] ?? '';
  const start = section.split('\n').findIndex((line) => line.trim().startsWith(`${title}:`));
  if (start < 0) return [];
  const operations: string[] = [];
  for (const line of section.split('\n').slice(start + 1)) {
    const operation = /^\s+- ([A-Z]+ \/\S*)\s*$/.exec(line)?.[1];
    if (operation) operations.push(operation);
    else if (line.trim() !== '' && operations.length > 0) break;
  }
  return operations;
}
