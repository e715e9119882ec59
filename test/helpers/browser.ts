import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { Browser, Page } from 'playwright-core';
import { chromium } from 'playwright-core';

/** Debian's Chromium (scripts/chromium.sh, which npm test runs first); playwright-core's own downloads cannot work here. */
export function launchChromium(): Promise<Browser> {
  const executablePath = process.env.BOT_AGENT_CHROMIUM ?? '/usr/bin/chromium';
  // --no-sandbox: the tests run as root, which Chromium's sandbox refuses.
  return chromium.launch({ executablePath, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
}

/**
 * What `watchPage` should expect where other test files' bots share the engine and come and go: one removed between
 * its last event and the table's reading of its row is the 404 that drops the row, no fault of the page's. A 404 for
 * a bot whose id ends with one of `ownSuffixes` (the test's own) still counts.
 */
export function othersRemoved(...ownSuffixes: string[]): RegExp[] {
  const notOwn = ownSuffixes.map((suffix) => `(?<!_${suffix})`).join('');
  return [new RegExp(`^404 GET .*/api/bots/bot_[^/]+${notOwn}$`), /status of 404 \(Not Found\)/];
}

/** What went wrong in a page while a test used it: console errors, uncaught exceptions, failed requests. */
export function watchPage(page: Page, { expected = [] }: { expected?: RegExp[] } = {}): string[] {
  const problems: string[] = [];
  // The browser's own abort when the host's networks change (the engine making a network for another test): no fault of the page's.
  const unexpected = (text: string) => !/net::ERR_NETWORK_CHANGED/.test(text) && !expected.some((pattern) => pattern.test(text));
  page.on('console', (message) => {
    if (message.type() === 'error' && unexpected(message.text())) problems.push(`console error: ${message.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`uncaught: ${err.message}`));
  page.on('requestfailed', (request) => {
    const failure = request.failure()?.errorText ?? '';
    // A read the browser dropped as the page left (a stream, or a reload an event began) is no failure: the console
    // aborts no request of its own, and an agent that failed a request makes another error (reset, empty response).
    if (failure === 'net::ERR_ABORTED' && request.method() === 'GET') return;
    if (unexpected(`${request.url()} ${failure}`)) problems.push(`request failed: ${request.method()} ${request.url()} ${failure}`);
  });
  page.on('response', (response) => {
    const line = `${response.status()} ${response.request().method()} ${response.url()}`;
    if (response.status() < 400 || !unexpected(line)) return;
    // What the agent said, so that a refusal seen once says which check made it.
    const index = problems.push(`answered ${line}`) - 1;
    void response.text().then(
      (body) => (problems[index] = `answered ${line}: ${body.slice(0, 300)}`),
      () => undefined,
    );
  });
  return problems;
}

/** axe-core's serious and critical findings on the page as it is now. */
export async function accessibilityViolations(page: Page): Promise<string[]> {
  const source = await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  // Evaluated through the DevTools protocol, which the page's Content-Security-Policy does not govern.
  await page.evaluate(source);
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: { id: string; impact: string; help: string; nodes: { target: string[] }[] }[] }> } }).axe;
    return (await axe.run()).violations;
  });
  return violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map((violation) => `${violation.impact} ${violation.id}: ${violation.help} (${violation.nodes.map((node) => node.target.join(' ')).join(', ')})`);
}
