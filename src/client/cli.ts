#!/usr/bin/env node
import { BotAgentClient, BotAgentError } from './index.js';

const usage = 'usage: bot-agent restart | stop | start | logs [lines] | stats   (as the bot named by BOT_ID)';

/** `bot-agent <command>`: what a bot's shell calls, printing the agent's answer. */
async function main(argv: string[]): Promise<number> {
  const [command, argument] = argv;
  const client = await BotAgentClient.create();
  switch (command) {
    case 'restart':
      console.log(await client.selfRestart());
      return 0;
    case 'stop':
      console.log(await client.stop());
      return 0;
    case 'start':
      console.log(await client.start());
      return 0;
    case 'logs':
      process.stdout.write(await client.logs(argument === undefined ? undefined : Number(argument)));
      return 0;
    case 'stats':
      console.log(JSON.stringify(await client.stats(), null, 2));
      return 0;
    default:
      console.error(usage);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`bot-agent: ${err instanceof BotAgentError ? err.message : String(err)}`);
    process.exit(1);
  },
);
