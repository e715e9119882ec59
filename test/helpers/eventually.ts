/** Polls `check` every `stepMs` until it holds or about `ms` pass; then answers it once more. */
export async function eventually(check: () => Promise<boolean> | boolean, ms = 15_000, stepMs = 20): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((resolve) => setTimeout(resolve, stepMs));
  }
  return check();
}
