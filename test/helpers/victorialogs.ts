/**
 * The real log database `npm test` starts (scripts/victorialogs.sh: VictoriaLogs on loopback). Absent, a test
 * that needs it fails, naming what to run.
 */
export function victoriaLogsUrl(): string {
  const url = process.env.BOT_AGENT_VICTORIALOGS;
  if (!url) throw new Error('BOT_AGENT_VICTORIALOGS is not set: run the tests through `npm test`, or `export BOT_AGENT_VICTORIALOGS=$(bash scripts/victorialogs.sh | tail -n 1)`');
  return url;
}

/** The rows a LogsQL query finds, read straight from the database. */
export async function logsQl(query: string): Promise<Record<string, string>[]> {
  const reply = await fetch(new URL('/select/logsql/query', victoriaLogsUrl()), { method: 'POST', body: new URLSearchParams({ query }) });
  if (!reply.ok) throw new Error(`LogsQL ${query}: HTTP ${reply.status} ${await reply.text()}`);
  return (await reply.text())
    .split('\n')
    .filter((row) => row !== '')
    .map((row) => JSON.parse(row) as Record<string, string>);
}
