/** Thrown for a patch body the API server would refuse; answered as a 400. */
export class PatchError extends Error {}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const isObject = (value: unknown): value is { [key: string]: Json } =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** RFC 7386 JSON merge patch. */
export function mergePatch(target: Json, patch: Json): Json {
  if (!isObject(patch)) return patch;
  const result: { [key: string]: Json } = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key] ?? null, value);
  }
  return result;
}

/** RFC 6902 JSON patch, the operations `add`, `replace` and `remove` on object members. */
export function jsonPatch(target: Json, operations: unknown): Json {
  if (!Array.isArray(operations)) {
    throw new PatchError('json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp');
  }
  const result = structuredClone(target);
  for (const operation of operations as Array<{ op?: string; path?: string; value?: Json }>) {
    const keys = (operation.path ?? '').split('/').slice(1).map((key) => key.replace(/~1/g, '/').replace(/~0/g, '~'));
    const last = keys.pop();
    let parent: Json = result;
    for (const key of keys) parent = isObject(parent) ? (parent[key] ?? null) : null;
    if (!isObject(parent) || last === undefined) throw new PatchError(`doc is missing path: "${operation.path}"`);
    if (operation.op === 'remove') delete parent[last];
    else if (operation.op === 'add' || operation.op === 'replace') parent[last] = operation.value ?? null;
    else throw new PatchError(`unsupported operation: ${operation.op}`);
  }
  return result;
}
