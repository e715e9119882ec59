/** Thrown for a selector the API server would refuse; answered as a 400. */
export class SelectorError extends Error {}

type Requirement = (get: (key: string) => string | undefined) => boolean;

/** Equality-based selector terms as the API server reads them: `k=v`, `k==v`, `k!=v`, `k`, `!k`. */
function parse(selector: string | null): Requirement[] {
  if (!selector) return [];
  return selector.split(',').map((term) => {
    const match = /^\s*(!?)([\w./-]+)\s*(?:(==|=|!=)\s*([\w.-]*))?\s*$/.exec(term);
    if (!match) throw new SelectorError(`unable to parse requirement: ${term}`);
    const [, not, key = '', op, value] = match;
    if (op === undefined) return (get) => (get(key) !== undefined) !== (not === '!');
    if (not) throw new SelectorError(`unable to parse requirement: ${term}`);
    return op === '!=' ? (get) => get(key) !== value : (get) => get(key) === value;
  });
}

/** Whether the labels satisfy the label selector. */
export function matchesLabels(selector: string | null, labels: Record<string, string> | undefined): boolean {
  return parse(selector).every((requirement) => requirement((key) => labels?.[key]));
}

/** Whether the object satisfies the field selector; fields the resource does not support are refused. */
export function matchesFields(selector: string | null, supported: Record<string, string | undefined>): boolean {
  return parse(selector).every((requirement) =>
    requirement((key) => {
      if (!(key in supported)) throw new SelectorError(`field label not supported: ${key}`);
      return supported[key];
    }),
  );
}
