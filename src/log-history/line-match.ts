import { RE2JS, RE2JSSyntaxException } from 're2js';
import { BadRequest } from '../errors.js';

/** The longest pattern a search may give (docs/api.md §21). */
export const PATTERN_MAX = 512;

/** What a search asks of a line's text; `anyOf` tells at once whether any of many lines may match. */
export interface LineMatch {
  (text: string): boolean;
  /** False only when no line of `lines` (texts joined by newlines) matches: a chunk of lines passed over whole. */
  readonly anyOf?: (lines: string) => boolean;
  /**
   * True where `anyOf` may be given each line with other text before it, ending in a tab (a stored row's fields):
   * the pattern has no `^`, so what it matches in a line it matches there too.
   */
  readonly unanchored?: boolean;
}

/**
 * A pattern whose match in one line is a match in those lines joined by newlines, with `^` and `$` at each line's
 * ends (RE2's multi-line mode): not one with `\A` or `\z` (the text's ends), nor one that turns a flag off (`(?-m)`).
 */
const joinable = (regex: string): boolean => !/\\[Az]|\(\?[a-zA-Z]*-/.test(regex);

/**
 * What a search's `q` and `regex` ask of a line's text, both when both are given. The regular expression is RE2's
 * (linear in the text, never backtracking), so no pattern can make a search run away.
 */
export function lineMatcher(q: string | undefined, regex: string | undefined): LineMatch | undefined {
  if (regex === undefined) return q === undefined ? undefined : (text) => text.includes(q);
  let compiled: RE2JS;
  try {
    compiled = RE2JS.compile(regex);
  } catch (err) {
    if (err instanceof RE2JSSyntaxException) throw new BadRequest(`regex is not a valid regular expression (RE2 syntax): ${err.message}`);
    throw err;
  }
  const line = (text: string): boolean => (q === undefined || text.includes(q)) && compiled.matcher(text).find();
  if (!joinable(regex)) return line;
  // One pass over many lines costs far less than a pass over each (RE2's set-up per text is most of a short line's time).
  const lines = RE2JS.compile(regex, RE2JS.MULTILINE);
  return Object.assign(line, { anyOf: (joined: string) => (q === undefined || joined.includes(q)) && lines.matcher(joined).find(), unanchored: !regex.includes('^') });
}
