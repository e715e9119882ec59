import { createHmac } from 'node:crypto';
import type { HistoryStore, PendingDelivery } from './history-store.js';

/** A delivery not answered 2xx within this is tried again (docs/api.md §9). */
export const DELIVERY_TIMEOUT_MS = 5_000;
/** Retries wait 1 s, 2 s, 4 s, ... up to this, ... */
const MAX_DELAY_MS = 5 * 60_000;
/** ... and stop once the event is this old: a day, as long as events are kept. */
export const GIVE_UP_MS = 24 * 3_600_000;
/** Deliveries in flight at once, each to a different bot's events. */
const CONCURRENCY = 8;
/** How long a delivery claimed by one agent is left to it: past this (it died meanwhile), another makes it. */
const CLAIM_MS = DELIVERY_TIMEOUT_MS * 4;

/** How long the `attempts`-th failed delivery waits before the next. */
export function retryDelayMs(attempts: number): number {
  return Math.min(1_000 * 2 ** Math.max(0, attempts - 1), MAX_DELAY_MS);
}

/** The X-Bot-Agent-Signature of a body. */
export function signatureOf(body: string, secret: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/** Where an event is delivered: the signed webhook, or a chat (docs/api.md §16). */
export interface DeliveryTarget {
  /** Its name in the store's record of targets reached, and in the log; never a secret. */
  readonly name: string;
  /** Whether an event of this type goes to it. */
  wants(type: string): boolean;
  /** Delivers; throws an Error whose message (never a secret) says why it did not. */
  send(delivery: PendingDelivery): Promise<void>;
}

export interface DeliveryOptions {
  readonly targets: readonly DeliveryTarget[];
  /** A bot's own targets (its chats, docs/api.md §16), read as each of its deliveries is made. */
  readonly botTargets?: ((botId: string) => Promise<readonly DeliveryTarget[]>) | undefined;
  readonly report: (what: string, err: unknown) => void;
}

/** AGENT_WEBHOOK_URL as a target: every event, signed with AGENT_WEBHOOK_SECRET. */
export function webhookTarget(url: string, secret: string): DeliveryTarget {
  return {
    name: 'webhook',
    wants: () => true,
    async send(delivery) {
      await postWithin(url, {
        'content-type': 'application/json',
        'x-bot-agent-event': delivery.type,
        'x-bot-agent-delivery': String(delivery.seq),
        'x-bot-agent-signature': signatureOf(delivery.data, secret),
      }, delivery.data);
    },
  };
}

/** POSTs `body`; resolves on a 2xx answer within DELIVERY_TIMEOUT_MS, else throws saying what came instead (never the URL). */
export async function postWithin(url: string, headers: Record<string, string>, body: string): Promise<void> {
  let response: Response;
  try {
    response = await fetch(url, { method: 'POST', headers, body, redirect: 'manual', signal: AbortSignal.timeout(DELIVERY_TIMEOUT_MS) });
  } catch (err) {
    throw new Error(err instanceof Error ? `${err.message}${err.cause instanceof Error ? `: ${err.cause.message}` : ''}` : String(err));
  }
  await response.body?.cancel();
  if (response.status < 200 || response.status >= 300) throw new Error(`answered ${response.status}`);
}

/**
 * Delivers every event to its targets (AGENT_WEBHOOK_URL, signed; the chats that want it), to each at least
 * once. Deliveries
 * wait in the store, queued in the transaction that keeps their event, so they
 * outlive a restart of the agent; only the oldest pending delivery of each bot
 * is tried, so that a bot's events arrive in order, and a receiver that is down
 * delays, never loses, them. Agents sharing a store claim each delivery before
 * making it: one at a time, and another once the claim of one that died lapses. A delivery that reached some
 * targets and not others is tried again for the others only.
 */
export class WebhookSender {
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private again = false;
  private closed = false;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly store: HistoryStore,
    private readonly options: DeliveryOptions,
  ) {}

  /** Sends whatever is due, now and whenever more falls due. */
  kick(): void {
    if (this.closed) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    void this.pump()
      .catch((err: unknown) => {
        this.options.report('webhook: the pending deliveries could not be read; trying again in 5 s', err);
        if (!this.closed) this.timer = setTimeout(() => this.kick(), 5_000).unref();
      })
      .finally(() => {
      this.running = false;
      if (this.again) {
        this.again = false;
        this.kick();
      }
    });
  }

  /** Stops sending; what is still pending is sent after the next start. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    await Promise.allSettled(this.inFlight);
  }

  private async pump(): Promise<void> {
    clearTimeout(this.timer);
    for (;;) {
      if (this.closed) return;
      const due = await this.store.claimDeliveries(Date.now(), CONCURRENCY, CLAIM_MS);
      if (due.length === 0) {
        const soonest = await this.store.nextDeliveryAt();
        if (soonest !== undefined && !this.closed) this.timer = setTimeout(() => this.kick(), Math.max(10, soonest - Date.now())).unref();
        return;
      }
      await Promise.all(due.map((delivery) => this.track(this.deliver(delivery))));
    }
  }

  private track(work: Promise<void>): Promise<void> {
    this.inFlight.add(work);
    return work.finally(() => this.inFlight.delete(work));
  }

  private async deliver(delivery: PendingDelivery): Promise<void> {
    const done = [...delivery.doneTargets];
    const failures: string[] = [];
    const own = (await this.options.botTargets?.(delivery.botId)) ?? [];
    const due = [...this.options.targets, ...own].filter((target) => target.wants(delivery.type) && !done.includes(target.name));
    await Promise.all(
      due.map(async (target) => {
        try {
          await target.send(delivery);
          done.push(target.name);
        } catch (err) {
          failures.push(`${target.name} ${(err as Error).message}`);
        }
      }),
    );
    if (failures.length === 0) {
      await this.store.deliveryDone(delivery.seq);
      return;
    }
    const failure = failures.join('; ');
    const attempts = delivery.attempts + 1;
    if (Date.now() - delivery.firstAtMs > GIVE_UP_MS) {
      await this.store.deliveryDone(delivery.seq);
      this.options.report(`webhook: gave up on event ${delivery.seq} after ${attempts} attempts`, new Error(failure));
      return;
    }
    if (attempts === 1 || attempts % 10 === 0) {
      this.options.report(`webhook: delivery of event ${delivery.seq} failed (${failure}); retrying`, new Error(failure));
    }
    await this.store.deliveryFailed(delivery.seq, attempts, Date.now() + retryDelayMs(attempts), done);
  }
}
