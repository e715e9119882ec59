import Router from '@koa/router';
import type { Context } from 'koa';
import { messages, NotFound, NotImplemented, Unprocessable } from '../errors.js';
import type { Backup, BackupMode } from '../backups/backup-folder.js';
import { backupHow, backupMade } from '../backups/backups.js';
import { DEFAULT_DEADLINE_S, DEFAULT_MIN_READY_S } from '../deploys/deploys.js';
import type { Backups } from '../backups/backups.js';
import type { Access } from './access.js';
import { backupArchiveQuery, backupRequest, backupStoreQuery, botIdInPath, restoreRequest, validate, validateQuery } from './schemas.js';

export interface BackupRoutesDeps {
  /** Undefined where the runtime keeps no bots' data, or the agent has no backup folder: each path answers 501. */
  readonly backups: Backups | undefined;
  readonly access: Access;
  readonly runtime: string;
}

/** A bot's backups (docs/api.md §20): the platform's alone. */
export function backupRoutes({ backups: available, access, runtime }: BackupRoutesDeps): Router {
  const router = new Router();

  /** The platform only, where backups are made. */
  async function botOf(ctx: Context): Promise<{ botId: string; backups: Backups }> {
    const botId = botIdInPath(ctx.params.bot_id);
    await access.platformFor(ctx, messages.platformOnlyBackups);
    ctx.state.botId = botId;
    if (!available) throw new NotImplemented(`backups are not available here: the ${runtime} runtime keeps no bots' data yet, or the agent keeps its history in memory with no AGENT_BACKUP_DIR (docs/api.md §20)`);
    return { botId, backups: available };
  }

  async function backupOf(ctx: Context, { botId, backups }: { botId: string; backups: Backups }): Promise<Backup> {
    return backups.one(botId, ctx.params.backup_id ?? '');
  }

  /** The store a read, restore or verification names (`?store=`), or undefined: the agent's folder. */
  const storeOf = (ctx: Context): string | undefined => validateQuery(backupStoreQuery, ctx.query).store;

  router.post('/api/admin/bots/:bot_id/backups', async (ctx) => {
    const { botId, backups } = await botOf(ctx);
    const body = validate(backupRequest, ctx.request.body ?? {});
    const { backup, removed } = await backups.take(botId, backupHow(body.mode as BackupMode | undefined, body.pre, body.pre_timeout_s), body.keep, body.stores);
    ctx.status = 201;
    ctx.body = { ok: true, message: backupMade(backup, removed), backup, removed };
  });

  router.get('/api/admin/bots/:bot_id/backups', async (ctx) => {
    const { botId, backups } = await botOf(ctx);
    const store = storeOf(ctx);
    ctx.body = { ok: true, backups: await backups.list(botId, store) };
  });

  router.get('/api/admin/bots/:bot_id/backups/:backup_id', async (ctx) => {
    const { botId, backups } = await botOf(ctx);
    const store = storeOf(ctx);
    ctx.body = { ok: true, backup: await backups.one(botId, ctx.params.backup_id ?? '', store) };
  });

  router.get('/api/admin/bots/:bot_id/backups/:backup_id/archive', async (ctx) => {
    const { folder: path } = validateQuery(backupArchiveQuery, ctx.query);
    const bot = await botOf(ctx);
    const backup = await backupOf(ctx, bot);
    const folder = backup.folders.find((kept) => kept.path === path);
    if (!folder) throw new NotFound(`backup ${backup.id} holds no folder ${JSON.stringify(path)}: it holds ${backup.folders.map((kept) => kept.path).join(', ')}`);
    const { stream, size } = await bot.backups.folder.open(backup, folder);
    ctx.set('content-type', 'application/gzip');
    ctx.set('content-length', String(size));
    ctx.set('content-disposition', `attachment; filename="${backup.id}-${backup.folders.indexOf(folder)}.tar.gz"`);
    ctx.set('x-content-sha256', folder.sha256);
    ctx.body = stream;
  });

  for (const [action, locked] of [['lock', true], ['unlock', false]] as const) {
    router.post(`/api/admin/bots/:bot_id/backups/:backup_id/${action}`, async (ctx) => {
      const bot = await botOf(ctx);
      const backup = await bot.backups.folder.setLocked(await backupOf(ctx, bot), locked);
      ctx.body = { ok: true, backup };
    });
  }

  router.post('/api/admin/bots/:bot_id/backups/:backup_id/restore', async (ctx) => {
    const { botId, backups } = await botOf(ctx);
    const store = storeOf(ctx);
    const asked = validate(restoreRequest, ctx.request.body ?? {});
    const into = asked.into ?? botId;
    const judged = { minReadyS: asked.min_ready_s ?? DEFAULT_MIN_READY_S, deadlineS: asked.deadline_s ?? DEFAULT_DEADLINE_S };
    const { backup, before } = await backups.restore(botId, ctx.params.backup_id ?? '', store, into, judged);
    ctx.body = { ok: true, message: `backup ${backup.id} of bot ${botId} restored into bot ${into}; its data as it was is backup ${before.id} of bot ${into}`, backup, before };
  });

  router.post('/api/admin/bots/:bot_id/backups/:backup_id/verify', async (ctx) => {
    const { botId, backups } = await botOf(ctx);
    const store = storeOf(ctx);
    const backup = await backups.verify(botId, ctx.params.backup_id ?? '', store);
    if (backup.verification?.ok !== true) throw new Unprocessable(`backup ${backup.id} of bot ${botId} failed its verification: ${backup.verification?.message ?? 'unknown'}`);
    ctx.body = { ok: true, message: `backup ${backup.id} of bot ${botId} verified: it reads back whole`, backup };
  });

  router.delete('/api/admin/bots/:bot_id/backups/:backup_id', async (ctx) => {
    const { botId, backups } = await botOf(ctx);
    const store = storeOf(ctx);
    const backupId = ctx.params.backup_id ?? '';
    await backups.remove(botId, backupId, store);
    ctx.body = { ok: true, message: `Backup ${backupId} of bot ${botId} removed${store === undefined ? '' : ` from store ${store}`}` };
  });

  return router;
}
