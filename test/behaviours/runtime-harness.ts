import type { Server } from 'node:http';

/** A bot a harness made on its runtime. */
export interface HarnessBot {
  readonly id: string;
}

export interface BotOptions {
  /** The owner's user id; `user_1` unless given. */
  owner?: string;
  /** Whether the bot runs once made; true unless given. */
  running?: boolean;
  /** What the bot has printed, one entry a line. */
  logLines?: string[];
  /** The lines printed two seconds apart, each with the second it was printed in (PACED_BOT). */
  paced?: boolean;
  /** The bot's restart takes about this long. */
  slowRestartMs?: number;
  /** False: a unit named like a bot that does not carry the bot label. */
  labelled?: boolean;
}

/** What a test sees of a call a bot made from its own address. */
export interface BotCallReply {
  status: number;
  body: Record<string, unknown> | undefined;
  raw: string;
}

/**
 * One runtime, real (Docker engine) or faithful (test Kubernetes API server),
 * with the whole agent over its real driver. The behaviours every runtime
 * must show are written once against this.
 */
export interface RuntimeHarness {
  readonly name: string;
  /** The agent over this runtime, reachable on loopback. */
  readonly agent: Server;
  createBot(options?: BotOptions): Promise<HarnessBot>;
  /** A bot id no bot has. */
  newBotId(): string;
  running(bot: HarnessBot): Promise<boolean>;
  /** Changes whenever the bot's process is started anew. */
  runId(bot: HarnessBot): Promise<string>;
  /** How many times the runtime restarted the bot since it was made. */
  restartCount(bot: HarnessBot): Promise<number>;
  /** An HTTP call to the agent from the bot's own address. */
  callFromBot(
    bot: HarnessBot,
    request: { method: string; path: string; headers?: Record<string, string>; body?: unknown },
  ): Promise<BotCallReply>;
  /** Another agent over the same runtime with this restart time-out; closed with the harness. */
  agentWithRestartTimeout(ms: number): Promise<Server>;
  /** An agent whose runtime cannot be reached; closed with the harness. */
  unreachableAgent(): Promise<Server>;
  close(): Promise<void>;
}
