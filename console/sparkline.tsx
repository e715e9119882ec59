/** A line of the last samples, drawn as SVG: cheap enough for a thousand rows. */
export function Sparkline({ values, label }: { values: number[]; label: string }) {
  const width = 80;
  const height = 20;
  if (values.length < 2) return <svg class="spark" width={width} height={height} role="img" aria-label={`${label}: not enough samples yet`} />;
  const max = Math.max(...values, 1e-9);
  const step = width / (values.length - 1);
  const points = values.map((value, i) => `${(i * step).toFixed(1)},${(height - 1 - (value / max) * (height - 2)).toFixed(1)}`).join(' ');
  return (
    <svg class="spark" width={width} height={height} viewBox={`0 0 ${width} ${height}`} role="img" aria-label={`${label} over the last ${values.length} samples`}>
      <polyline points={points} fill="none" stroke="currentColor" stroke-width="1.5" />
    </svg>
  );
}
