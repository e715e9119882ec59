import { RE2JS, RE2JSSyntaxException } from 're2js';
import { BadRequest } from '../errors.js';

/** The longest pattern a search may give (docs/api.md §21). */
export const PATTERN_MAX = 512;

/**
 * What a search's `q` and `regex` ask of a line's text, both when both are given. The regular expression is RE2's
 * (linear in the text, never backtracking), so no pattern can make a search run away.
 */
export function lineMatcher(q: string | undefined, regex: string | undefined): ((text: string) => boolean) | undefined {
  if (regex === undefined) return q === undefined ? undefined : (text) => text.includes(q);
  let compiled: RE2JS;
  try {
    compiled = RE2JS.compile(regex);
  } catch (err) {
    if (err instanceof RE2JSSyntaxException) throw new BadRequest(`regex is not a valid regular expression (RE2 syntax): ${err.message}`);
    throw err;
  }
  return (text) => (q === undefined || text.includes(q)) && compiled.matcher(text).find();
}
