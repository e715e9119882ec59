// Where a request's CPU goes: a V8 CPU profile (node --cpu-prof) of a server under the bench's load,
// each sample put in one stage of a request, so that the agent and koa alone can be set side by side.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

interface CallFrame {
  functionName: string;
  url: string;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const DRIVER = 'driver (stats, logs, status; its HTTP client)';
/** The stages, in the order a request meets them; each with what its code is. */
const STAGES: Array<[stage: string, matches: RegExp]> = [
  ['parse & validate (body, yup)', /\/(yup|@koa\/bodyparser|@hapi\/bourne|co-body|raw-body|iconv-lite)\/|\/http\/(schemas|json-body)\.[jt]s/],
  ['identity (who calls)', /\/http\/(caller|cross-site)\.[jt]s|\/loopback\.[jt]s|\/docker-bot-index\.[jt]s|\/kube-watched\.[jt]s/],
  ['access & limits', /\/http\/(access|read-limiter|log-reads|stream-limits)\.[jt]s|\/lifecycle\/rate-limiter\.[jt]s/],
  [DRIVER, /\/runtime\/|\/history\/|\/(dockerode|docker-modem|@kubernetes\/client-node|lru-cache)\//],
  ['answer (view, envelope)', /\/http\/(stats-view|envelope)\.[jt]s/],
  ['access log line (pino)', /\/(pino|sonic-boom|quick-format-unescaped|fast-redact|pino-std-serializers|thread-stream)\/|\/http\/request-log\.[jt]s/],
  ['metrics (prom-client)', /\/prom-client\/|\/http\/metrics\.[jt]s|^node:internal\/perf\//],
  ["the agent's other HTTP code (routes, errors, headers)", /\/(src|dist)\/(http\/[\w-]+|errors)\.[jt]s/],
  ['koa & @koa/router', /\/node_modules\//],
];
const GC = 'garbage collection';
const SOCKET = 'socket writes (the kernel)';
const SERIALISE = 'JSON.stringify';
const NODE = 'node:http, streams, event loop';
const OTHER = 'V8 and native, other';

/** The order stages are listed in. */
export const STAGE_ORDER = [...STAGES.map(([stage]) => stage), SERIALISE, SOCKET, NODE, GC, OTHER];

/** The stage of a sample: what its leaf is, else the nearest frame of a package or of the agent's own code. */
function stageOf(leaf: ProfileNode, parentOf: Map<number, ProfileNode>): string {
  const { functionName, url } = leaf.callFrame;
  if (functionName === '(garbage collector)') return GC;
  if (url === '' && /^(writeUtf8String|writeLatin1String|writeBuffer|writev)$/.test(functionName)) return SOCKET;
  if (url === '' && functionName === 'stringify') return SERIALISE;
  let sawNode = false;
  for (let node: ProfileNode | undefined = leaf; node; node = parentOf.get(node.id)) {
    const at = node.callFrame.url;
    if (at === '') continue;
    if (at.startsWith('node:')) {
      // A profile's own timers aside, Node's internals are the stage of whoever called them.
      if (at.startsWith('node:internal/perf/')) return 'metrics (prom-client)';
      // The agent's HTTP client talks to the engine (or the API server): the driver's.
      if (at.startsWith('node:_http_client') || at.startsWith('node:_http_agent')) return DRIVER;
      sawNode = true;
      continue;
    }
    const found = STAGES.find(([, matches]) => matches.test(at));
    if (found) return found[0];
  }
  return sawNode ? NODE : OTHER;
}

/** Microseconds of CPU per stage in `profile` (idle left out), over the samples taken between `fromUs` and `toUs` (V8's clock: CLOCK_MONOTONIC). */
export function stagesOf(profile: CpuProfile, fromUs = -Infinity, toUs = Infinity): Map<string, number> {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parentOf = new Map<number, ProfileNode>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node);
  const stages = new Map<string, number>();
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0;
    at += delta;
    const leaf = byId.get(id);
    if (!leaf || at < fromUs || at > toUs || leaf.callFrame.functionName === '(idle)') return;
    const stage = stageOf(leaf, parentOf);
    stages.set(stage, (stages.get(stage) ?? 0) + delta);
  });
  return stages;
}

/** The profile `node --cpu-prof --cpu-prof-dir=dir` wrote for the process `pid`. */
export function profileOf(dir: string, pid: number): CpuProfile {
  const file = readdirSync(dir).find((name) => name.includes(`.${pid}.`) && name.endsWith('.cpuprofile'));
  if (!file) throw new Error(`no CPU profile of process ${pid} in ${dir}`);
  return JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile;
}

/** Microseconds per request, per stage, for `requests` requests. */
export function perRequest(stages: Map<string, number>, requests: number): Record<string, number> {
  return Object.fromEntries(STAGE_ORDER.map((stage) => [stage, Number(((stages.get(stage) ?? 0) / requests).toFixed(1))]));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  // node --import=tsx scripts/bench-profile.ts FILE.cpuprofile REQUESTS: the stages of one profile, per request.
  const [file, requests] = process.argv.slice(2);
  const profile = JSON.parse(readFileSync(file ?? '', 'utf8')) as CpuProfile;
  process.stdout.write(`${JSON.stringify(perRequest(stagesOf(profile), Number(requests ?? 1)), null, 2)}\n`);
}
