import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { OTHER_NODE_MAX_BYTES, otherNodesRows } from '../../src/fleet/fleet-view.js';
import type { NodeView } from '../../src/fleet/node-beacon.js';
import type { NodeBot } from '../../src/history/history-store.js';

// The console's table over the fleet (docs/api.md §17): the rows other nodes' agents answer, and for a node away,
// without an address, or whose answer fails, its bots as its agent last said.
const KEY = 'fleet-key-0123456789abcdef0123456789abcdef';

/** Another node's agent on loopback, answering GET /api/console/fleet as `answer` does. */
async function otherAgent(t: ExecutionContext, answer: (request: IncomingMessage, response: ServerResponse) => void): Promise<string> {
  const server = createServer(answer).listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const node = (name: string, url: string | null, alive: boolean): NodeView => ({ node: name, url, alive, seen_at: '2026-11-28T06:00:00.000Z', bots: 1, running: 1, self: false });

test("rows of the nodes that answer; a node away, without an address, or answering past the bound: its bots as last said", async (t) => {
  const authorizations: string[] = [];
  const answering = await otherAgent(t, (request, response) => {
    authorizations.push(String(request.headers.authorization));
    response.setHeader('content-type', 'application/json');
    response.end(JSON.stringify({ ok: true, bots: [{ bot_id: 'bot_1_1_b', node: 'node-b' }] }));
  });
  // A valid answer, one byte past the bound, sent in pieces.
  const flooding = await otherAgent(t, (_request, response) => {
    response.setHeader('content-type', 'application/json');
    const head = '{"ok":true,"bots":[{"bot_id":"bot_1_1_c","padding":"';
    const tail = '"}]}';
    let left = OTHER_NODE_MAX_BYTES + 1 - head.length - tail.length;
    response.write(head);
    const piece = 'x'.repeat(1024 * 1024);
    const more = (): void => {
      while (left > 0) {
        const part = piece.slice(0, Math.min(piece.length, left));
        left -= part.length;
        if (!response.write(part)) {
          response.once('drain', more);
          return;
        }
      }
      response.end(tail);
    };
    more();
  });
  const held: Record<string, NodeBot[]> = {
    'node-c': [{ botId: 'bot_1_1_c', running: true }],
    'node-d': [{ botId: 'bot_1_1_d', running: false }],
    'node-e': [{ botId: 'bot_1_1_e', running: true }],
  };
  const nodes = async (): Promise<NodeView[]> => [
    { ...node('node-a', null, true), self: true },
    node('node-b', answering, true),
    node('node-c', flooding, true),
    node('node-d', 'http://127.0.0.1:9', false),
    node('node-e', null, true),
  ];
  const reports: string[] = [];
  const read = otherNodesRows({ nodes, botsOf: async (name) => held[name] ?? [] }, KEY, (what) => reports.push(what));
  const { rows, lastKnown } = await read();
  t.deepEqual(rows, [{ bot_id: 'bot_1_1_b', node: 'node-b' }]);
  t.deepEqual(authorizations, [`Fleet ${KEY}`]);
  t.deepEqual(
    lastKnown.map((known) => [known.node, known.seenAt, known.bots]),
    ['node-c', 'node-d', 'node-e'].map((name) => [name, '2026-11-28T06:00:00.000Z', held[name]]),
  );
  t.is(reports.length, 1);
  t.regex(reports[0]!, new RegExp(`^node node-c's bots are shown as its agent last said: its answer passed ${OTHER_NODE_MAX_BYTES} bytes`));
});

test("the fleet's database silent: no other node's rows, said once; a node whose bots cannot be read is left out", async (t) => {
  const reports: string[] = [];
  const silent = otherNodesRows(
    {
      nodes: async () => {
        throw new Error('database does not answer');
      },
      botsOf: async () => [],
    },
    KEY,
    (what) => reports.push(what),
  );
  t.deepEqual(await silent(), { rows: [], lastKnown: [] });
  const unreadable = otherNodesRows(
    {
      nodes: async () => [node('node-d', null, false)],
      botsOf: async () => {
        throw new Error('database does not answer');
      },
    },
    KEY,
    (what) => reports.push(what),
  );
  t.deepEqual(await unreadable(), { rows: [], lastKnown: [] });
  t.deepEqual(reports, [
    "the other nodes' bots were left out of the console's table: the fleet's nodes could not be read",
    "node node-d's bots were left out of the console's table: the fleet's database did not say them",
  ]);
});
