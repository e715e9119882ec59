import test from 'ava';
import { decodeNodeCursors, encodeNodeCursors, mergeParts } from '../../src/log-history/nodes-search.js';
import type { NodePart } from '../../src/log-history/nodes-search.js';

// A bot's search over the nodes that keep its lines (docs/api.md §21): parts merged by time, and each node's place.
const part = (node: string, ats: number[], next: string | null, from = '', partial = false): NodePart<string> => ({
  node,
  from,
  next,
  partial,
  lines: ats.map((at) => ({ at: new Date(at).toISOString(), position: `${at}-1`, view: `${node}@${at}` })),
});

test('parts are merged by time; each node goes on after its last line taken, from where it was when none was, or stops', (t) => {
  const merged = mergeParts([part('node-a', [1, 4, 6], '6-1'), part('node-b', [2, 3], null), part('node-c', [], null)], 'oldest', 3, 1e6, () => 1);
  t.deepEqual(merged.lines, ['node-a@1', 'node-b@2', 'node-b@3']);
  t.deepEqual(merged.next, { 'node-a': '1-1', 'node-b': null, 'node-c': null });
  const newest = mergeParts([part('node-a', [6, 4], '4-1', '9-1'), part('node-b', [5], null)], 'newest', 1, 1e6, () => 1);
  t.deepEqual(newest.lines, ['node-a@6']);
  t.deepEqual(newest.next, { 'node-a': '6-1', 'node-b': '' }, 'node-b had a line not taken: asked again from its start');
  const bounded = mergeParts([part('node-a', [1, 2], null)], 'oldest', 10, 5, () => 3);
  t.deepEqual(bounded.lines, ['node-a@1'], 'the bytes bound the page as the limit does');
  t.deepEqual(bounded.next, { 'node-a': '1-1' });
});

test("a cursor of several nodes' places decodes as it was made; anything else a search never answered does not", (t) => {
  const cursor = encodeNodeCursors({ 'node-a': '12-3', 'node-b': '', 'node-c': null })!;
  t.deepEqual(decodeNodeCursors(cursor), { 'node-a': '12-3', 'node-b': '', 'node-c': null });
  t.is(encodeNodeCursors({ 'node-a': null }), null, 'no node has more: no cursor');
  for (const bad of ['n.bm90LWpzb24', 'n.W10', `n.${Buffer.from('{"Node A":"1-1"}').toString('base64url')}`, `n.${Buffer.from('{"a":"x"}').toString('base64url')}`, 'n.!!', '12-3']) {
    t.is(decodeNodeCursors(bad), undefined, bad);
  }
});
