/**
 * Reads whose answers may come back out of order (a page reads again at every event): each read takes a
 * turn, and only the newest turn's answer is shown, never an older one that arrived after it.
 */
export function newestOnly(): () => () => boolean {
  let turns = 0;
  return () => {
    const turn = ++turns;
    return () => turn === turns;
  };
}
