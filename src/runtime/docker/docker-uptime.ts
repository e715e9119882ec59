const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/**
 * Each shape of a listing's `Up …` with the longest and the shortest run it may stand for: the engine truncates
 * seconds to days (`About a minute` is 60 to 119 s), and rounds hours (`About an hour` is 59.5 to 89 minutes).
 */
const UNITS: ReadonlyArray<[RegExp, (count: number) => number, (count: number) => number]> = [
  [/^Up Less than a second\b/, () => SECOND, () => 0],
  [/^Up (\d+) seconds?\b/, (n) => (n + 1) * SECOND, (n) => n * SECOND],
  [/^Up About a minute\b/, () => 2 * MINUTE, () => MINUTE],
  [/^Up (\d+) minutes?\b/, (n) => (n + 1) * MINUTE, (n) => n * MINUTE],
  [/^Up About an hour\b/, () => 1.5 * HOUR, () => HOUR - MINUTE / 2],
  [/^Up (\d+) hours?\b/, (n) => (n + 0.5) * HOUR, (n) => (n - 0.5) * HOUR],
  [/^Up (\d+) days?\b/, (n) => (n + 1) * DAY + HOUR / 2, (n) => n * DAY - HOUR / 2],
  [/^Up (\d+) weeks?\b/, (n) => (n + 1) * 7 * DAY, (n) => n * 7 * DAY],
  [/^Up (\d+) months?\b/, (n) => (n + 1) * 30 * DAY, (n) => n * 30 * DAY],
  [/^Up (\d+) years?\b/, (n) => (n + 1) * 365 * DAY, (n) => n * 365 * DAY],
];

/** The longest and the shortest a running container can have run, read from its listing's status line; undefined for a line of another shape. */
function uptimeBoundsMs(status: string | undefined): { ceiling: number; floor: number } | undefined {
  for (const [shape, ceiling, floor] of UNITS) {
    const match = shape.exec(status ?? '');
    if (match) return { ceiling: ceiling(Number(match[1] ?? 0)), floor: floor(Number(match[1] ?? 0)) };
  }
  return undefined;
}

/**
 * The longest a running container can have run, read from its listing's
 * status line (`Up 5 seconds (healthy)`, the engine's human duration);
 * undefined for a line of another shape.
 */
export function uptimeCeilingMs(status: string | undefined): number | undefined {
  return uptimeBoundsMs(status)?.ceiling;
}

/**
 * Whether a container the listing shows running has started since `startedAt`:
 * it has run for less time than it would have had it run since then. `listedAtMs`
 * is taken before the listing was asked for, so a slow answer is never taken for
 * a restart; a second is allowed for the agent's and the engine's clocks.
 */
export function startedAfter(status: string | undefined, startedAt: Date, listedAtMs: number): boolean {
  const ceiling = uptimeCeilingMs(status);
  return ceiling !== undefined && listedAtMs - startedAt.getTime() > ceiling + SECOND;
}

/**
 * Whether a container the listing shows running may have started since `sinceMs`: its status line does not
 * prove it had run longer than that by `answeredAtMs`, taken once the listing's answer came (the engine wrote
 * the line before it); a second is allowed for the clocks. A line of another shape proves nothing.
 */
export function mayHaveStartedSince(status: string | undefined, sinceMs: number, answeredAtMs: number): boolean {
  const floor = uptimeBoundsMs(status)?.floor;
  return floor === undefined || floor < answeredAtMs - sinceMs + SECOND;
}
