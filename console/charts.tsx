import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { api } from './api.js';

interface Sample {
  at: string;
  cpu_percent: number;
  memory_bytes: number;
}

const REFRESH_MS = 15_000;

/** One uPlot chart of a series over time, drawn again when its data changes. */
function Chart({ label, unit, times, values }: { label: string; unit: string; times: number[]; values: number[] }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | undefined>(undefined);
  useEffect(() => {
    const element = box.current!;
    const width = Math.max(240, element.clientWidth);
    plot.current = new uPlot(
      {
        width,
        height: 160,
        legend: { show: false },
        scales: { y: { range: (_u, _min, max) => [0, Math.max(max, 1)] } },
        axes: [{ stroke: 'currentColor' }, { stroke: 'currentColor', values: (_u, ticks) => ticks.map((tick) => `${tick.toFixed(unit === '%' ? 1 : 0)} ${unit}`), size: 70 }],
        series: [{}, { label, stroke: unit === '%' ? '#2f7fd8' : '#c2410c', width: 2, fill: unit === '%' ? 'rgba(47,127,216,0.15)' : 'rgba(194,65,12,0.15)' }],
      },
      [times, values],
      element,
    );
    const observer = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(240, element.clientWidth), height: 160 }));
    observer.observe(element);
    return () => {
      observer.disconnect();
      plot.current?.destroy();
    };
  }, []);
  useEffect(() => plot.current?.setData([times, values]), [values]);
  return (
    <figure>
      <figcaption>{label}</figcaption>
      <div ref={box} role="img" aria-label={`${label}: ${values.length} samples, the last ${values.at(-1)?.toFixed(1) ?? 'none'} ${unit}`} />
    </figure>
  );
}

/** The bot's CPU and memory of the last 15 minutes, as the agent sampled them. */
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
  const cpu = useMemo(() => samples.map((sample) => sample.cpu_percent), [samples]);
  const memory = useMemo(() => samples.map((sample) => sample.memory_bytes / 1024 / 1024), [samples]);
  return (
    <div class="charts">
      {samples.length === 0 && <p>No samples yet: the agent reads every running bot each 15 s.</p>}
      <Chart label="CPU" unit="%" times={times} values={cpu} />
      <Chart label="Memory" unit="MB" times={times} values={memory} />
    </div>
  );
}
