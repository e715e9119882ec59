import { backupMade } from '../backups/backups.js';
import type { Backups } from '../backups/backups.js';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Deploys } from '../deploys/deploys.js';
import { NotImplemented, Unprocessable } from '../errors.js';
import type { BotHistory } from '../history/bot-history.js';
import type { DeployRequest } from '../deploys/deploys.js';
import type { PullReport } from '../provisioning/provisioner.js';
import type { BotLifecycle } from '../lifecycle/bot-lifecycle.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import type { ScheduleActions } from './chain.js';

/** How often a scheduled deploy's revision is read until it is judged. */
const VERDICT_EVERY_MS = 1_000;
/** How long past its deadline and its time to be up a scheduled deploy waits for its verdict. */
const VERDICT_MARGIN_MS = 60_000;

export interface AgentActionParts {
  readonly driver: RuntimeDriver;
  readonly lifecycle: BotLifecycle;
  readonly history: BotHistory;
  readonly deploys: Deploys | undefined;
  /** A `deploy` action's body (the PATCH body, docs/api.md §15) as Deploys takes it. */
  readonly deployOf: (body: Readonly<Record<string, unknown>>) => DeployRequest;
  /** Where a deploy's pulls are told (its events). */
  readonly pulls: (botId: string) => PullReport;
  /** Told of each operation a schedule asks for before it runs, as of the API's (a crash back-off ends). */
  readonly onAsked?: ((botId: string) => void) | undefined;
  /** Backups of bots' data, where they are made (docs/api.md §20). */
  readonly backups?: Pick<Backups, 'take' | 'list' | 'verify'> | undefined;
}

/** A schedule's actions done as the platform's own requests are (docs/api.md §18): through the lifecycle, its events and its deploys. */
export function agentActions({ driver, lifecycle, history, deploys, deployOf, pulls, onAsked, backups }: AgentActionParts): ScheduleActions {
  return {
    running: async (botId) => (await driver.findBot(botId)).running,
    power: async (botId, operation) => {
      onAsked?.(botId);
      try {
        const outcome = operation === 'restart' ? (await lifecycle.restart(botId), 'done') : await lifecycle[operation](botId);
        await history.operationEnded(botId, operation, 'ok', 'platform');
        const done = { restart: 'restarted', stop: 'stopped', start: 'started' }[operation];
        return outcome === 'already' ? `Bot ${botId} was already ${operation === 'stop' ? 'stopped' : 'running'}` : `Bot ${botId} ${done}`;
      } catch (err) {
        await history.operationEnded(botId, operation, `failed ${(err as { status?: number }).status ?? 500}`, 'platform').catch(() => undefined);
        throw err;
      }
    },
    deploy: async (botId, body) => {
      if (!deploys) throw new NotImplemented(`deploys are not available on the ${driver.runtime} runtime yet`);
      onAsked?.(botId);
      const request = deployOf(body);
      const revision = await deploys.deploy(botId, request, 'platform', pulls(botId));
      const until = Date.now() + (request.deadlineS + request.minReadyS) * 1000 + VERDICT_MARGIN_MS;
      while (Date.now() < until) {
        const record = (await history.revisions(botId, 5).catch(() => [])).find((kept) => kept.revision === revision);
        if (record && record.outcome !== 'deploying') {
          if (record.outcome === 'succeeded') return `revision ${revision} deployed`;
          throw new Error(`revision ${revision} ${record.outcome}${record.reason ? `: ${record.reason}` : ''}`);
        }
        await sleep(VERDICT_EVERY_MS);
      }
      throw new Error(`revision ${revision} was not judged in time`);
    },
    backup: async (botId, how, keep, stores) => {
      if (!backups) throw new NotImplemented(`backups are not available on this agent (docs/api.md §20)`);
      const { backup, removed } = await backups.take(botId, how, keep, stores);
      return backupMade(backup, removed);
    },
    verify: async (botId, store) => {
      if (!backups) throw new NotImplemented(`backups are not available on this agent (docs/api.md §20)`);
      const [newest] = await backups.list(botId, store);
      if (!newest) throw new Unprocessable(`bot ${botId} has no backup ${store === undefined ? "in the agent's folder" : `in store ${store}`} to verify`);
      const verified = await backups.verify(botId, newest.id, store);
      if (verified.verification?.ok !== true) throw new Unprocessable(`backup ${newest.id} failed its verification: ${verified.verification?.message ?? 'unknown'}`);
      return `backup ${newest.id} of bot ${botId} verified: it reads back whole`;
    },
    command: async (botId, argv, bounds) => {
      if (!driver.exec) throw new NotImplemented(`commands in bots are not available on the ${driver.runtime} runtime`);
      return driver.exec(botId, argv, bounds);
    },
  };
}
