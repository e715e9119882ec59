import { Ajv2020 } from 'ajv/dist/2020.js';
import { openApiDocument } from '../../src/http/openapi.js';

const ajv = new Ajv2020({ strict: false, allErrors: false });
ajv.addSchema({ ...openApiDocument, $id: 'openapi' });
const anyEnvelope = ajv.compile({ type: 'object', required: ['ok'], properties: { ok: { type: 'boolean' } } });

const templates = Object.keys(openApiDocument.paths).map((template) => ({
  template,
  pattern: new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`),
}));
const pointer = (...parts: string[]) => parts.map((part) => part.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');

/**
 * How an answer differs from what /openapi.json promises for it, or undefined
 * when it fits: a documented operation must answer a documented status with a
 * body of its schema; anything else must still be the envelope. An event
 * stream (`stream`) must be one the operation documents at that status; its
 * events are not read here.
 */
export function openApiMismatch(method: string, url: string, status: number, body: unknown, stream = false): string | undefined {
  const path = url.split(/[?#]/)[0] ?? url;
  const template = templates.find((t) => t.pattern.test(path))?.template;
  const operations = template ? (openApiDocument.paths as Record<string, Record<string, { responses: Record<string, unknown> }>>)[template] : undefined;
  const operation = operations?.[method.toLowerCase()];
  if (template === '/metrics' && method === 'GET' && status === 200) return undefined;
  if (!template || !operation) {
    return !stream && anyEnvelope(body) ? undefined : `${method} ${path} ${status}: not the envelope`;
  }
  if (!(String(status) in operation.responses)) return `${method} ${template}: status ${status} is not documented`;
  if (stream) {
    const content = (operation.responses[String(status)] as { content?: Record<string, unknown> }).content ?? {};
    return 'text/event-stream' in content ? undefined : `${method} ${template} ${status}: not documented as an event stream`;
  }
  // An answer documented only as something other than JSON (the console's page and files) is not read here.
  const content = (operation.responses[String(status)] as { content?: Record<string, unknown> }).content ?? {};
  if (!('application/json' in content) && Object.keys(content).length > 0) return undefined;
  const validate = ajv.getSchema(
    `openapi#/${pointer('paths', template, method.toLowerCase(), 'responses', String(status), 'content', 'application/json', 'schema')}`,
  );
  if (!validate) return `${method} ${template} ${status}: no schema`;
  return validate(body) ? undefined : `${method} ${template} ${status}: ${ajv.errorsText(validate.errors)} in ${JSON.stringify(body)}`;
}
