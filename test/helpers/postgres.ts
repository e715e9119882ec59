import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import pg from 'pg';

const run = promisify(execFile);

/** The server npm test starts (scripts/postgres.sh); a test file that needs it fails loudly without it. */
function serverUrl(): string {
  const url = process.env.BOT_AGENT_DATABASE_URL;
  if (!url) throw new Error('BOT_AGENT_DATABASE_URL is not set: run the tests with npm test, which starts PostgreSQL (scripts/postgres.sh)');
  return url;
}

const made: string[] = [];

/** The URL of a new, empty database of its own, dropped by `dropDatabases`. */
export function freshDatabase(): Promise<string> {
  return makeDatabase(serverUrl());
}

async function makeDatabase(server: string): Promise<string> {
  const name = `history_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  if (server === process.env.BOT_AGENT_DATABASE_URL) made.push(name);
  const url = new URL(server);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Drops every database this test file made. */
export async function dropDatabases(): Promise<void> {
  const admin = new pg.Client({ connectionString: serverUrl() });
  await admin.connect();
  for (const name of made.splice(0)) {
    // FORCE ends this role's sessions, not the server's own: an autovacuum worker in the database (a superuser's)
    // refuses it (42501) for the moment it runs; tried again while it does.
    for (let tries = 1; ; tries += 1) {
      try {
        await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        break;
      } catch (err) {
        if ((err as { code?: string }).code !== '42501' || tries >= 20) throw err;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  }
  await admin.end();
}

/**
 * A PostgreSQL server of one test file's own, made by the same script as the
 * shared one (scripts/postgres.sh) in its own folder and on its own port, so
 * that the test may stop, start, freeze and thaw it while other files use theirs.
 */
export class OwnPostgres {
  private frozen: number[] = [];

  constructor(
    private readonly name: string,
    private readonly port: number,
  ) {}

  /** Starts the server (made on first use); resolves with its database's URL. */
  async start(): Promise<string> {
    const { stdout } = await run('bash', ['scripts/postgres.sh'], { env: this.env() });
    return stdout.trim().split('\n').at(-1) ?? '';
  }

  /** Stops the server as an operator would (`pg_ctl stop -m fast`): connections end, new ones are refused. */
  async stop(): Promise<void> {
    await run('bash', ['scripts/postgres.sh', '--stop'], { env: this.env() });
  }

  /** Freezes every process of the server (SIGSTOP), as a host that stopped answering: connections stay open, nothing answers. */
  freeze(): void {
    const postmaster = Number(readFileSync(`${this.dataDir()}/cluster/postmaster.pid`, 'utf8').split('\n')[0]);
    this.frozen = [postmaster, ...childrenOf(postmaster)];
    for (const pid of this.frozen) process.kill(pid, 'SIGSTOP');
  }

  thaw(): void {
    for (const pid of this.frozen.splice(0)) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch (err) {
        // A child that was ending as it froze, reaped by the server once it went on: nothing left to thaw.
        if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
      }
    }
  }

  /** A new, empty database on this server. */
  async freshDatabase(serverUrl: string): Promise<string> {
    return makeDatabase(serverUrl);
  }

  private dataDir(): string {
    return `/var/lib/bot-agent-postgres-${this.name}`;
  }

  private env(): NodeJS.ProcessEnv {
    return { ...process.env, BOT_AGENT_PG_DATA: this.dataDir(), BOT_AGENT_PG_PORT: String(this.port) };
  }
}

/** The processes whose parent is `pid`, from /proc. */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // Fields after the command's name, which is in parentheses and may hold spaces: state, then the parent's pid.
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (parent === pid) children.push(Number(entry));
    } catch {
      // The process ended meanwhile.
    }
  }
  return children;
}
