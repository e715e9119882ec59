#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { BotAgentClient, BotAgentError, PlatformClient } from './index.js';
import type { BotEvent, DeployChange, LogLine } from './index.js';

const usage = `usage: bot-agent [--bot <bot_id>] <command>
  As the bot named by BOT_ID; with --bot, as the platform (BOT_AGENT_ADMIN_TOKEN, or from the agent's host) on any
  bot, at BOT_AGENT_URL (else PLATFORM_AGENT_URL, else http://127.0.0.1:8000).
  restart | stop | start       a lifecycle operation (stop and start name the owner from USER_ID)
  logs [lines] [--follow]      the last lines (100); with --follow, then each new line until Ctrl-C
  stats                        CPU, memory and uptime
  status                       state, crashes in the last hour and the last exit
  exits [limit]                exit records, newest first (20)
  events [--after <id>]        events as they happen, one JSON per line; --after replays the kept ones first
  revisions                    the bot's revisions, newest first
 the platform's (from the host, or with BOT_AGENT_ADMIN_TOKEN):
  deploy [--image <ref>] [--env NAME=value]... [--min-ready <s>] [--deadline <s>] [--no-rollback] [--wait]
                               a new revision; with --wait, until it is judged (exit 1 if it failed)
  rollback                     back to the previous revision
  backup [--live] [--store <name>]...
                               a backup of the bot's data now (stopped for it unless --live), copied to each store
  backups [--store <name>]     the bot's backups, newest first: the agent's folder's, or the store's
  restore <backup_id> [--store <name>]
                               the backup put back into the bot (its data as it was kept as a backup first)
  verify <backup_id> [--store <name>]
                               the backup unpacked beside the bot and read back (exit 1 if it fails)
 the platform's, of no one bot:
  list [--user <user_id>] [--limit <n>] [--after <bot_id>]
                               the bots, in the order of their ids, with their total (a page with --limit)
  nodes                        the fleet's nodes, alive or away, their bots counted
  move <node> --bot <bot_id>   the bot moved to that node (docs/api.md §17)
  events                       every bot's events, as they happen (without --bot and BOT_ID)`;

/** A number argument, or a usage error naming it. */
function countOf(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw new UsageError(`${name} must be a whole number, got "${value}"`);
  return Number(value);
}

class UsageError extends Error {}

/** `NAME=value` of --env, as an entry. */
function variableOf(given: string): [string, string] {
  const at = given.indexOf('=');
  if (at <= 0) throw new UsageError(`--env takes NAME=value, got "${given}"`);
  return [given.slice(0, at), given.slice(at + 1)];
}

/** The one line an `exited` event prints while following logs. */
function endOfRun(event: BotEvent): string {
  const exit = (event.exit ?? {}) as { exit_code?: number | null; signal?: string | null; oom_killed?: boolean; requested?: boolean };
  const how = [
    exit.exit_code === null || exit.exit_code === undefined ? 'no exit code' : `exit code ${exit.exit_code}`,
    exit.signal,
    exit.oom_killed ? 'killed for memory' : undefined,
    exit.requested ? 'requested' : undefined,
  ].filter(Boolean);
  return `bot-agent: the run ended at ${event.at} (${how.join(', ')})`;
}

/** Runs until Ctrl-C (or SIGTERM), then ends the stream and returns. */
function untilInterrupted(): AbortSignal {
  const controller = new AbortController();
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => controller.abort());
  return controller.signal;
}

/** `bot-agent <command>`: what a bot's shell calls, printing the agent's answer. */
async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        follow: { type: 'boolean', short: 'f' },
        after: { type: 'string' },
        image: { type: 'string' },
        env: { type: 'string', multiple: true },
        'min-ready': { type: 'string' },
        deadline: { type: 'string' },
        'no-rollback': { type: 'boolean' },
        wait: { type: 'boolean' },
        live: { type: 'boolean' },
        store: { type: 'string', multiple: true },
        bot: { type: 'string' },
        user: { type: 'string' },
        limit: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const [command, argument, extra] = parsed.positionals;
  const { follow, after, image, env, 'min-ready': minReady, deadline, 'no-rollback': noRollback, wait, live, store, bot, user, limit, help } = parsed.values;
  if (help) {
    console.log(usage);
    return 0;
  }
  const deployOptions = [image, env, minReady, deadline, noRollback, wait].some((value) => value !== undefined);
  if (extra !== undefined || (follow && command !== 'logs') || (after !== undefined && command !== 'events' && command !== 'list') || (deployOptions && command !== 'deploy')) {
    throw new UsageError(`unexpected arguments for ${command ?? 'no command'}`);
  }
  if ((user !== undefined || limit !== undefined) && command !== 'list') throw new UsageError(`unexpected arguments for ${command ?? 'no command'}`);
  const platform = PlatformClient.create();
  switch (command) {
    case 'list':
      if (argument !== undefined || bot !== undefined) throw new UsageError('list takes no bot');
      console.log(JSON.stringify(await platform.bots({ userId: user, limit: countOf('--limit', limit), after }), null, 2));
      return 0;
    case 'nodes':
      if (argument !== undefined || bot !== undefined) throw new UsageError('nodes takes no bot');
      console.log(JSON.stringify(await platform.nodes(), null, 2));
      return 0;
    case 'move':
      if (argument === undefined || bot === undefined) throw new UsageError('move takes the node, and the bot as --bot, e.g. move node-b --bot bot_1_2_a');
      console.log(`bot-agent: ${await platform.move(bot, argument)}`);
      return 0;
    case 'events':
      if (bot === undefined && !process.env.BOT_ID) {
        for await (const event of platform.events({ after, signal: untilInterrupted() })) console.log(JSON.stringify(event));
        return 0;
      }
  }
  const backupCommands = ['backup', 'backups', 'restore', 'verify'];
  if ((live && command !== 'backup') || (store !== undefined && (!backupCommands.includes(command ?? '') || (store.length > 1 && command !== 'backup')))) {
    throw new UsageError(`unexpected arguments for ${command ?? 'no command'}`);
  }
  const known = ['restart', 'stop', 'start', 'logs', 'stats', 'status', 'exits', 'events', 'revisions', 'deploy', 'rollback', ...backupCommands];
  if (command === undefined || !known.includes(command)) throw new UsageError(command === undefined ? 'no command' : `unknown command "${command}"`);
  const takesBackup = command === 'restore' || command === 'verify';
  if (takesBackup && argument === undefined) throw new UsageError(`${command} takes the backup's id, e.g. bak_20261203T120000Z_0123abcd`);
  if (argument !== undefined && command !== 'logs' && command !== 'exits' && !takesBackup) throw new UsageError(`${command} takes no argument`);
  const count = takesBackup ? undefined : countOf(command === 'exits' ? 'limit' : 'lines', argument);
  const client = bot === undefined ? await BotAgentClient.create() : await platform.bot(bot);
  switch (command) {
    case 'restart':
      // The bot restarts itself; the platform restarts it as its owner's call.
      console.log(bot === undefined ? await client.selfRestart() : await client.restart());
      return 0;
    case 'stop':
      console.log(await client.stop());
      return 0;
    case 'start':
      console.log(await client.start());
      return 0;
    case 'logs': {
      if (!follow) {
        process.stdout.write(await client.logs(count));
        return 0;
      }
      const signal = untilInterrupted();
      for await (const item of client.followLogs({ lines: count, signal })) {
        if (item.type === 'log') {
          const line = item as LogLine;
          (line.stream === 'stderr' ? process.stderr : process.stdout).write(`${line.line}\n`);
        } else if (item.type === 'exited') {
          console.error(endOfRun(item));
        }
      }
      if (signal.aborted) return 0;
      console.error('bot-agent: the agent closed the log stream');
      return 1;
    }
    case 'stats':
      console.log(JSON.stringify(await client.stats(), null, 2));
      return 0;
    case 'status':
      console.log(JSON.stringify(await client.status(), null, 2));
      return 0;
    case 'exits':
      console.log(JSON.stringify(await client.exits(count), null, 2));
      return 0;
    case 'revisions':
      console.log(JSON.stringify(await client.revisions(), null, 2));
      return 0;
    case 'rollback':
      console.log(`bot-agent: revision ${await client.rollback()} runs again`);
      return 0;
    case 'backup':
      console.log(JSON.stringify(await client.backup(live ? 'live' : 'stop', store), null, 2));
      return 0;
    case 'backups':
      console.log(JSON.stringify(await client.backups(store?.[0]), null, 2));
      return 0;
    case 'restore':
      console.log(`bot-agent: ${await client.restore(argument!, store?.[0])}`);
      return 0;
    case 'verify':
      console.log(JSON.stringify(await client.verify(argument!, store?.[0]), null, 2));
      return 0;
    case 'deploy': {
      const change: DeployChange = {
        ...(image === undefined ? {} : { image }),
        ...(env === undefined ? {} : { env: Object.fromEntries(env.map(variableOf)) }),
        ...(minReady === undefined ? {} : { min_ready_s: countOf('--min-ready', minReady) }),
        ...(deadline === undefined ? {} : { deadline_s: countOf('--deadline', deadline) }),
        ...(noRollback ? { rollback: false } : {}),
      };
      const revision = await client.deploy(change);
      console.log(`bot-agent: revision ${revision} started`);
      if (!wait) return 0;
      const judged = await client.waitForRevision(revision, { signal: untilInterrupted() });
      console.log(JSON.stringify(judged, null, 2));
      return judged.outcome === 'succeeded' ? 0 : 1;
    }
    default: {
      for await (const event of client.events({ after, signal: untilInterrupted() })) console.log(JSON.stringify(event));
      return 0;
    }
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof UsageError) {
      console.error(`bot-agent: ${err.message}\n${usage}`);
      process.exit(2);
    }
    console.error(`bot-agent: ${err instanceof BotAgentError ? err.message : String(err)}`);
    process.exit(1);
  },
);
