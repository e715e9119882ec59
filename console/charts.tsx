import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { api } from './api.js';

interface Sample {
  at: string;
  cpu_percent: number;
  memory_bytes: number;
  network_rx_bytes: number | null;
  network_tx_bytes: number | null;
}

const REFRESH_MS = 15_000;
/** What the charts span: the samples the agent keeps (docs/api.md §12). */
const SPAN_S = 15 * 60;
/** Ticks of the time axis: whole minutes only, so no two read the same. */
const TIME_INCREMENTS = [60, 120, 300, 600, 900];

/** A unit of bytes, chosen by the largest value drawn. */
interface ByteUnit {
  readonly name: string;
  readonly size: number;
}

const BYTE_UNITS: readonly ByteUnit[] = [
  { name: 'GiB', size: 1024 ** 3 },
  { name: 'MiB', size: 1024 ** 2 },
  { name: 'KiB', size: 1024 },
  { name: 'B', size: 1 },
];

function byteUnit(largest: number): ByteUnit {
  return BYTE_UNITS.find((unit) => largest >= unit.size) ?? BYTE_UNITS[1]!;
}

const pad = (n: number) => String(n).padStart(2, '0');
/** A time tick as the operator's clock reads it: 14:05. */
const clockTick = (seconds: number) => {
  const at = new Date(seconds * 1000);
  return `${pad(at.getHours())}:${pad(at.getMinutes())}`;
};

/** As many decimals as the step between ticks needs, so that no two ticks read the same (a step of 0.2: one). */
function tickText(value: number, step: number, unit: string): string {
  const decimals = Math.min(3, Math.max(0, Math.ceil(-Math.log10(step || 1))));
  return `${value.toFixed(decimals)} ${unit}`;
}

interface Line {
  readonly label: string;
  readonly values: (number | null)[];
  readonly color: string;
}

/**
 * One uPlot chart over the last 15 minutes, drawn again when its data changes. Its axes' tick texts are on
 * the figure too (data-x-ticks, data-y-ticks), as the screen shows them.
 */
function Chart({ label, unit, times, lines, summary }: { label: string; unit: string; times: number[]; lines: Line[]; summary: string }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | undefined>(undefined);
  const unitNow = useRef(unit);
  unitNow.current = unit;
  useEffect(() => {
    const element = box.current!;
    const width = Math.max(240, element.clientWidth);
    const shown = (key: 'xTicks' | 'yTicks', texts: string[]) => {
      element.dataset[key] = texts.join('|');
      return texts;
    };
    plot.current = new uPlot(
      {
        width,
        height: 160,
        legend: { show: lines.length > 1 },
        scales: {
          // Always the last 15 minutes, however few samples there are: a single sample is a point in it.
          x: { time: true, range: () => [Math.floor(Date.now() / 1000) - SPAN_S, Math.floor(Date.now() / 1000)] },
          y: { range: (_u, _min, max) => [0, Math.max(max * 1.1, 1)] },
        },
        axes: [
          { stroke: 'currentColor', incrs: TIME_INCREMENTS, values: (_u, ticks) => shown('xTicks', ticks.map(clockTick)) },
          { stroke: 'currentColor', size: 80, values: (_u, ticks, _axis, _space, step) => shown('yTicks', ticks.map((tick) => tickText(tick, step, unitNow.current))) },
        ],
        series: [{}, ...lines.map((line) => ({ label: line.label, stroke: line.color, width: 2, points: { show: true, size: 5 }, spanGaps: false }))],
      },
      [times, ...lines.map((line) => line.values)],
      element,
    );
    const observer = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(240, element.clientWidth), height: 160 }));
    observer.observe(element);
    return () => {
      observer.disconnect();
      plot.current?.destroy();
    };
  }, []);
  useEffect(() => plot.current?.setData([times, ...lines.map((line) => line.values)]), [times, lines]);
  return (
    <figure>
      <figcaption>
        {label} ({unit})
      </figcaption>
      <div ref={box} role="img" aria-label={`${label}: ${summary}`} data-samples={times.length} />
    </figure>
  );
}

/** Bytes a second between each sample and the one before; none across a new run (its counters begin again) or a gap. */
function ratesOf(times: number[], counters: (number | null)[]): (number | null)[] {
  return counters.map((value, i) => {
    const before = counters[i - 1];
    if (i === 0 || value === null || before === null || before === undefined || value < before) return null;
    const seconds = times[i]! - times[i - 1]!;
    return seconds > 0 ? (value - before) / seconds : null;
  });
}

/** The bot's CPU, memory and network of the last 15 minutes, as the agent sampled them (kept across its restarts). */
export function Charts({ botId }: { botId: string }) {
  const [samples, setSamples] = useState<Sample[]>([]);
  useEffect(() => {
    const load = () =>
      api<{ samples: Sample[] }>(`/api/bots/${encodeURIComponent(botId)}/stats/history`).then(
        (answer) => setSamples(answer.samples),
        () => undefined,
      );
    void load();
    const timer = setInterval(load, REFRESH_MS);
    return () => clearInterval(timer);
  }, [botId]);
  const times = useMemo(() => samples.map((sample) => Date.parse(sample.at) / 1000), [samples]);
  const cpu = useMemo(() => [{ label: 'CPU', color: '#2f7fd8', values: samples.map((sample) => sample.cpu_percent) }], [samples]);
  const memoryUnit = byteUnit(Math.max(0, ...samples.map((sample) => sample.memory_bytes)));
  const memory = useMemo(() => [{ label: 'Memory', color: '#c2410c', values: samples.map((sample) => sample.memory_bytes / memoryUnit.size) }], [samples, memoryUnit]);
  const told = samples.some((sample) => sample.network_rx_bytes !== null);
  const [received, sent] = useMemo(
    () => [ratesOf(times, samples.map((sample) => sample.network_rx_bytes)), ratesOf(times, samples.map((sample) => sample.network_tx_bytes))],
    [samples],
  );
  const networkUnit = byteUnit(Math.max(0, ...[...received, ...sent].map((rate) => rate ?? 0)));
  const network = useMemo(
    () => [
      { label: 'received', color: '#15803d', values: received.map((rate) => (rate === null ? null : rate / networkUnit.size)) },
      { label: 'sent', color: '#7c3aed', values: sent.map((rate) => (rate === null ? null : rate / networkUnit.size)) },
    ],
    [received, sent, networkUnit],
  );
  const last = (values: (number | null)[], unit: string) => {
    const value = values.at(-1);
    return value === null || value === undefined ? 'none yet' : `the last ${value.toFixed(1)} ${unit}`;
  };
  return (
    <div class="charts">
      {samples.length === 0 && <p>No samples yet: the agent reads every running bot each 15 s.</p>}
      <Chart label="CPU" unit="%" times={times} lines={cpu} summary={`${samples.length} samples, ${last(cpu[0]!.values, '%')}`} />
      <Chart label="Memory" unit={memoryUnit.name} times={times} lines={memory} summary={`${samples.length} samples, ${last(memory[0]!.values, memoryUnit.name)}`} />
      {told || samples.length === 0 ? (
        <Chart
          label="Network"
          unit={`${networkUnit.name}/s`}
          times={times}
          lines={network}
          summary={`received ${last(network[0]!.values, `${networkUnit.name}/s`)}, sent ${last(network[1]!.values, `${networkUnit.name}/s`)}`}
        />
      ) : (
        <p data-testid="no-network">Network: this runtime does not tell a bot's traffic.</p>
      )}
    </div>
  );
}
