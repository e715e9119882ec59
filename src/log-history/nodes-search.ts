import { NODE_NAME } from '../config.js';

/**
 * A bot's search over the nodes that keep its lines (docs/api.md §21): each node answers its own part, the parts are
 * merged by time, and the page's `next` says where each node goes on from. The place of each node is kept in one
 * cursor of its own shape, `n.` and a base64url JSON object: the node's own cursor, "" for from the start, or null
 * for a node with nothing more.
 */
export type NodeCursors = Readonly<Record<string, string | null>>;

/** A line of a node's part: when, where that node goes on after it, and what the answer shows of it. */
export interface PartLine<View> {
  readonly at: string;
  readonly position: string;
  readonly view: View;
}

/** One node's answer to a bot's search: its lines in the order asked, where it goes on after the last, whether its budget cut it. */
export interface NodePart<View> {
  readonly node: string;
  /** The cursor it was asked with; "" for from the start. */
  readonly from: string;
  readonly lines: readonly PartLine<View>[];
  readonly next: string | null;
  readonly partial: boolean;
}

const PREFIX = 'n.';
const POSITION = /^(\d{1,16}-\d{1,16})?$/;
/** The most nodes one cursor names, and its longest text: far beyond a fleet, bounded all the same. */
const NODES_MAX = 256;
export const NODE_CURSOR_MAX = 16_384;

export const isNodeCursor = (cursor: string): boolean => cursor.startsWith(PREFIX);

export function encodeNodeCursors(cursors: NodeCursors): string | null {
  return Object.values(cursors).every((cursor) => cursor === null) ? null : `${PREFIX}${Buffer.from(JSON.stringify(cursors)).toString('base64url')}`;
}

/** The places a cursor of this shape holds; undefined for one that is not a `next` such a search answered. */
export function decodeNodeCursors(cursor: string): NodeCursors | undefined {
  if (!isNodeCursor(cursor) || cursor.length > NODE_CURSOR_MAX || !/^[\w-]*$/.test(cursor.slice(PREFIX.length))) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor.slice(PREFIX.length), 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
  const entries = Object.entries(parsed);
  if (entries.length > NODES_MAX) return undefined;
  for (const [node, place] of entries) {
    if (!NODE_NAME.test(node) || !(place === null || (typeof place === 'string' && POSITION.test(place)))) return undefined;
  }
  return parsed as NodeCursors;
}

/**
 * The first `limit` lines of all parts by time (newest or oldest first; a node's own order kept among lines of one
 * millisecond), within `maxBytes` as `bytesOf` counts each; and where each node goes on from after them.
 */
export function mergeParts<View>(
  parts: readonly NodePart<View>[],
  order: 'newest' | 'oldest',
  limit: number,
  maxBytes: number,
  bytesOf: (view: View) => number,
): { lines: View[]; next: NodeCursors; partial: boolean } {
  const all = parts.flatMap((part) => part.lines.map((line, index) => ({ line, part, index })));
  const sign = order === 'newest' ? -1 : 1;
  all.sort((a, b) => sign * a.line.at.localeCompare(b.line.at) || a.part.node.localeCompare(b.part.node) || a.index - b.index);
  const taken = new Map<NodePart<View>, number>();
  const lines: View[] = [];
  let bytes = 0;
  for (const { line, part } of all.slice(0, limit)) {
    bytes += bytesOf(line.view);
    if (bytes > maxBytes) break;
    lines.push(line.view);
    taken.set(part, (taken.get(part) ?? 0) + 1);
  }
  const next: Record<string, string | null> = {};
  for (const part of parts) {
    const count = taken.get(part) ?? 0;
    // None taken: where it was, or, having had nothing to give, where it stopped (null: it has nothing more).
    if (count === 0) next[part.node] = part.lines.length > 0 ? part.from : (part.next ?? (part.partial ? part.from : null));
    else if (count < part.lines.length) next[part.node] = part.lines[count - 1]!.position;
    else next[part.node] = part.next;
  }
  return { lines, next, partial: parts.some((part) => part.partial) };
}
