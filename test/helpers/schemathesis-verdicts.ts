/**
 * What schemathesis said beside its failures: the blocks of its ERRORS section (a request that failed,
 * a crash of its own: a judge that crashed judged nothing) and the lines of its Warnings summary.
 */
export function verdictsOf(output: string): { errors: string[]; warnings: string[] } {
  const errors = /={3,} ERRORS ={3,}\n([\s\S]*?)(?:\n={3,} [A-Z]+ ={3,}|$)/.exec(output)?.[1] ?? '';
  const warnings = /^Warnings:\n((?:[ \t]+\S.*\n?)*)/m.exec(output)?.[1] ?? '';
  return {
    errors: errors.split(/^_{3,} /m).map((block) => block.trim()).filter((block) => block.length > 0),
    warnings: warnings.split('\n').map((line) => line.trim()).filter((line) => line.length > 0),
  };
}
