import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** The server npm test starts (scripts/postgres.sh); a test file that needs it fails loudly without it. */
function serverUrl(): string {
  const url = process.env.BOT_AGENT_DATABASE_URL;
  if (!url) throw new Error('BOT_AGENT_DATABASE_URL is not set: run the tests with npm test, which starts PostgreSQL (scripts/postgres.sh)');
  return url;
}

const made: string[] = [];

/** The URL of a new, empty database of its own, dropped by `dropDatabases`. */
export async function freshDatabase(): Promise<string> {
  const name = `history_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  made.push(name);
  const url = new URL(serverUrl());
  url.pathname = `/${name}`;
  return url.toString();
}

/** Drops every database this test file made. */
export async function dropDatabases(): Promise<void> {
  const admin = new pg.Client({ connectionString: serverUrl() });
  await admin.connect();
  for (const name of made.splice(0)) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
}
