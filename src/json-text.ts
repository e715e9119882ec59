/**
 * How much room text takes once it is written inside a JSON string: every bound
 * on what the agent answers or keeps (logs, exit records) is measured there, not
 * on the text before it.
 */

/** The most bytes one UTF-16 code unit can take inside a JSON string (`\u0001`). */
const MAX_JSON_BYTES_PER_UNIT = 6;

/** Bytes the code unit at `at` (with its pair, when it begins one) takes inside a JSON string as JSON.stringify writes it, in UTF-8. */
function jsonUnitBytes(code: number): number {
  if (code < 0x20) return code === 0x08 || code === 0x09 || code === 0x0a || code === 0x0c || code === 0x0d ? 2 : 6;
  if (code === 0x22 || code === 0x5c) return 2;
  if (code < 0x80) return 1;
  if (code < 0x800) return 2;
  return 3;
}

const isHighSurrogate = (code: number): boolean => code >= 0xd800 && code <= 0xdbff;
const isLowSurrogate = (code: number): boolean => code >= 0xdc00 && code <= 0xdfff;

/**
 * How many bytes `text` takes once written inside a JSON string (UTF-8, as
 * JSON.stringify escapes it): a control character takes six (`\u0001`), so a
 * bound on text is not a bound on the answer that carries it.
 */
export function jsonBytes(text: string): number {
  let bytes = 0;
  for (let at = 0; at < text.length; at += 1) {
    const code = text.charCodeAt(at);
    if (isHighSurrogate(code) && isLowSurrogate(text.charCodeAt(at + 1))) {
      bytes += 4;
      at += 1;
    } else bytes += isHighSurrogate(code) || isLowSurrogate(code) ? 6 : jsonUnitBytes(code);
  }
  return bytes;
}

/**
 * The newest whole lines of `text` that take at most `maxBytes` inside a JSON
 * string; when the newest line alone takes more, its end.
 */
export function fitJson(text: string, maxBytes: number): string {
  if (text.length * MAX_JSON_BYTES_PER_UNIT <= maxBytes || jsonBytes(text) <= maxBytes) return text;
  let start = text.length;
  for (let budget = maxBytes; start > 0; ) {
    const code = text.charCodeAt(start - 1);
    const pair = isLowSurrogate(code) && isHighSurrogate(text.charCodeAt(start - 2));
    const cost = pair ? 4 : isHighSurrogate(code) || isLowSurrogate(code) ? 6 : jsonUnitBytes(code);
    if (cost > budget) break;
    budget -= cost;
    start -= pair ? 2 : 1;
  }
  if (start === 0 || text.charCodeAt(start - 1) === 0x0a) return text.slice(start);
  const newline = text.indexOf('\n', start);
  return newline >= 0 && newline + 1 < text.length ? text.slice(newline + 1) : text.slice(start);
}
