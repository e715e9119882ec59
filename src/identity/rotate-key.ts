// Rotates the key that signs bots' tokens (docs/api.md §4, rule 8), in the AGENT_DATA_DIR the agent uses:
//   docker exec agent node dist/identity/rotate-key.js      (or: AGENT_DATA_DIR=./data node dist/identity/rotate-key.js)
// Bots created from then on get tokens of the new key; tokens of the old one verify for 7 days more.
// The agent reads its keys when it starts: restart it for it to sign with the new key.
import { BotTokens, KEYS_FILE, ROTATION_GRACE_MS } from './bot-tokens.js';

const dataDir = process.env.AGENT_DATA_DIR?.trim() || './data';
BotTokens.open(dataDir).rotate();
const until = new Date(Date.now() + ROTATION_GRACE_MS).toISOString();
console.log(`${dataDir}/${KEYS_FILE}: a new key signs bots' tokens once the agent restarts; tokens of the key before verify until ${until}`);
