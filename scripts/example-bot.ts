// npm run example-bot: a bot to try the agent with, made through the agent as the platform makes one (README
// "Try it"). It is the local busybox image (scripts/docker-engine.sh --test-image) running a small script: a line
// every 5 s, a heartbeat each time through PLATFORM_AGENT_URL (http://agent:8000, as any bot calls its agent), and a
// quick end on SIGTERM. The agent is BOT_AGENT_URL (else npm start's http://127.0.0.1:8000), with BOT_AGENT_ADMIN_TOKEN
// where it asks for one; the bot is EXAMPLE_BOT_ID (else bot_1_1_example).
const agentUrl = (process.env.BOT_AGENT_URL || 'http://127.0.0.1:8000').replace(/\/+$/, '');
const botId = process.env.EXAMPLE_BOT_ID || 'bot_1_1_example';
const token = process.env.BOT_AGENT_ADMIN_TOKEN;

/** What the bot runs: busybox's sh and wget, the heartbeat's answer kept out of its output. */
const SCRIPT = [
  'trap "echo example bot: stopping; exit 0" TERM',
  'n=0',
  'while :; do',
  '  n=$((n + 1))',
  '  echo "example bot: tick $n"',
  // Its first beat once it has run a moment: the agent knows a bot by its address from the engine's events.
  '  sleep 5 & wait $!',
  '  wget -qO /dev/null --header "Content-Type: application/json" --header "X-Bot-ID: $BOT_ID" --post-data "{\\"ttl_s\\": 30}" "$PLATFORM_AGENT_URL/api/bots/self/heartbeat" || echo "example bot: the agent at $PLATFORM_AGENT_URL refused or did not answer its heartbeat" >&2',
  'done',
].join('\n');

const create = {
  bot_id: botId,
  user_id: 'user_1',
  image: 'bot-agent-testbot:latest',
  template: 'discord',
  token: 'example-token-not-a-secret',
  command: ['sh', '-c', SCRIPT],
  health: { heartbeat: { ttl_s: 30 } },
};

let reply: Response;
try {
  reply = await fetch(`${agentUrl}/api/admin/bots`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(create),
  });
} catch (err) {
  console.error(`example-bot: no agent answers at ${agentUrl} (${(err as Error).cause ?? (err as Error).message}): start it with npm start, or set BOT_AGENT_URL`);
  process.exit(1);
}
const answer = (await reply.json().catch(() => ({}))) as { ok?: boolean; msg?: string; message?: string };
if (reply.status === 409) console.log(`example-bot: ${answer.msg ?? 'it exists already'}; it is used as it is`);
else if (!answer.ok) {
  console.error(`example-bot: the agent refused the bot: ${reply.status} ${answer.msg ?? ''}`);
  process.exit(1);
} else console.log(`example-bot: ${answer.message}`);
console.log(`Try it:
  curl ${agentUrl}/api/bots/${botId}                       # its state, health and last exit
  curl '${agentUrl}/api/bots/${botId}/logs?lines=5'        # its last lines
  curl -N '${agentUrl}/api/bots/${botId}/logs?follow=true' # its lines as they come
  curl ${agentUrl}/api/bots/${botId}/stats
  curl -X POST ${agentUrl}/api/bots/restart -H 'Content-Type: application/json' -d '{"bot_id":"${botId}","user_id":"user_1"}'
  open ${agentUrl}/ in a browser (the console), or: bot-agent status --bot ${botId} (docs/clients.md)
  curl -X DELETE ${agentUrl}/api/admin/bots/${botId}       # removes it`);
