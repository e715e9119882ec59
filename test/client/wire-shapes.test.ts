import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import test from 'ava';
import ts from 'typescript';
import { openApiDocument } from '../../src/http/openapi.js';

const run = promisify(execFile);

// One source for the answers' shapes: /openapi.json, which every answer of the HTTP tests is checked against. The
// TypeScript client's types (clients/typescript/src/wire.ts, which the console shares) and the Python client's TypedDicts are
// compared with it here, field by field: a field added, dropped or retyped on one side and not the other fails.

/** A field's shape, as both sides can say it: JSON types (integer apart from number), an enum, or another shape. */
type Shape = string;
type Shapes = Record<string, Record<string, Shape>>;

/** The shapes the clients name, and where the document keeps each. */
const WIRE: Record<string, (schemas: Record<string, JsonSchema>) => JsonSchema> = {
  BotStats: (schemas) => schemas.Stats!.properties!.stats!,
  ExitRecord: (schemas) => schemas.ExitRecord!,
  BotStatus: (schemas) => schemas.BotStatus!.properties!.bot!,
  Health: (schemas) => schemas.Health!,
  UnhealthyEnd: (schemas) => schemas.UnhealthyEnd!,
};

interface JsonSchema {
  type?: string | string[];
  enum?: string[];
  $ref?: string;
  oneOf?: JsonSchema[];
  properties?: Record<string, JsonSchema>;
}

/** A schema's shape: `integer|null`, `enum(a,b)`, `ExitRecord|null`; a reference to BotId is a string. */
function shapeOfSchema(schema: JsonSchema): Shape {
  if (schema.oneOf) return schema.oneOf.map(shapeOfSchema).sort().join('|');
  if (schema.$ref) {
    const name = schema.$ref.split('/').at(-1) ?? '';
    return name === 'BotId' ? 'string' : name;
  }
  if (schema.enum) return `enum(${[...schema.enum].sort().join(',')})`;
  return [schema.type ?? []].flat().sort().join('|');
}

function documentShapes(): Shapes {
  const schemas = JSON.parse(JSON.stringify(openApiDocument.components.schemas)) as Record<string, JsonSchema>;
  return Object.fromEntries(
    Object.entries(WIRE).map(([name, find]) => [name, Object.fromEntries(Object.entries(find(schemas).properties ?? {}).map(([field, schema]) => [field, shapeOfSchema(schema)]))]),
  );
}

/** The shape of a TypeScript type as wire.ts writes it. */
function shapeOfType(type: ts.TypeNode): Shape {
  if (ts.isUnionTypeNode(type)) {
    // String literals are one enum, as the document says them; the rest (null, another shape) stand beside it.
    const isText = (member: ts.TypeNode): member is ts.LiteralTypeNode => ts.isLiteralTypeNode(member) && ts.isStringLiteral(member.literal);
    const texts = type.types.filter(isText).map((member) => (member.literal as ts.StringLiteral).text);
    const others = type.types.filter((member) => !isText(member)).map(shapeOfType);
    return [...(texts.length > 0 ? [`enum(${texts.sort().join(',')})`] : []), ...others].sort().join('|');
  }
  if (ts.isLiteralTypeNode(type) && type.literal.kind === ts.SyntaxKind.NullKeyword) return 'null';
  if (ts.isArrayTypeNode(type)) return 'array';
  if (ts.isTypeReferenceNode(type)) return type.typeName.getText();
  return type.getText();
}

const WIRE_TS = readFileSync('clients/typescript/src/wire.ts', 'utf8');

function typescriptShapes(text = WIRE_TS): Shapes {
  const source = ts.createSourceFile('wire.ts', text, ts.ScriptTarget.Latest, true);
  const shapes: Shapes = {};
  for (const statement of source.statements) {
    if (!ts.isInterfaceDeclaration(statement) || !(statement.name.text in WIRE)) continue;
    shapes[statement.name.text] = Object.fromEntries(
      statement.members.filter(ts.isPropertySignature).map((member) => [member.name.getText(), shapeOfType(member.type!)]),
    );
  }
  return shapes;
}

/** The Python client's TypedDicts, read by Python itself (typing.get_type_hints), in the same words. */
const PYTHON_SHAPES = `
import json, sys, typing
import bot_agent._common as wire
def shape(hint):
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        return "|".join(sorted(shape(arg) for arg in args))
    if origin is typing.Literal:
        return "enum(%s)" % ",".join(sorted(args))
    if hint is type(None):
        return "null"
    if origin is list:
        return "array"
    if typing.is_typeddict(hint):
        return hint.__name__
    return {str: "string", int: "integer", float: "number", bool: "boolean"}[hint]
print(json.dumps({name: {field: shape(hint) for field, hint in typing.get_type_hints(getattr(wire, name)).items()} for name in sys.argv[1:]}))
`;

async function pythonShapes(): Promise<Shapes> {
  const { stdout } = await run('python3', ['-c', PYTHON_SHAPES, ...Object.keys(WIRE)], { env: { ...process.env, PYTHONPATH: 'clients/python/src' } });
  return JSON.parse(stdout) as Shapes;
}

/** TypeScript has one number: the document's integers are numbers to it. */
const asTypescript = (shapes: Shapes): Shapes =>
  Object.fromEntries(Object.entries(shapes).map(([name, fields]) => [name, Object.fromEntries(Object.entries(fields).map(([field, shape]) => [field, shape.split('|').map((part) => (part === 'integer' ? 'number' : part)).sort().join('|')]))]));

test("the TypeScript client's answer types are the document's, field by field", (t) => {
  const document = documentShapes();
  t.true(Object.keys(document.BotStatus ?? {}).length > 5, 'the document read');
  t.deepEqual(typescriptShapes(), asTypescript(document));
});

test("the Python client's TypedDicts are the document's, field by field", async (t) => {
  t.deepEqual(await pythonShapes(), documentShapes());
});

test('a field one side retypes, drops or adds is found', (t) => {
  const document = asTypescript(documentShapes());
  for (const drift of [
    WIRE_TS.replace('exit_code: number | null;', 'exit_code: number;'),
    WIRE_TS.replace('  uptime: string | null;\n', ''),
    WIRE_TS.replace('  crashes_last_hour: number;', '  crashes_last_hour: number;\n  restarts: number;'),
  ]) {
    t.not(drift, WIRE_TS);
    t.notDeepEqual(typescriptShapes(drift), document);
  }
});
