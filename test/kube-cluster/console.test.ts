import test from 'ava';
import { CoreV1Api } from '@kubernetes/client-node';
import { createKubernetesDriver } from '../../src/runtime/kubernetes/kube-driver.js';
import { createKubernetesProvisioner } from '../../src/runtime/kubernetes/kube-provisioner.js';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { startAgent } from '../helpers/agent.js';
import { launchChromium, watchPage } from '../helpers/browser.js';
import { eventually } from '../helpers/eventually.js';
import { adminKubeConfig, clusterHarness } from './cluster-harness.js';
import { execInPod } from './pod-exec.js';

// The console once on the real cluster: the same page over the Kubernetes driver, its table, a bot's live
// logs, and its stop and start buttons, checked on the cluster afterwards.
test('the console over a real cluster: the table lists the bot, its live tail shows a new line, stop and start act on its Deployment', async (t) => {
  const { harness, namespace, agentConfig } = await clusterHarness();
  const agent = await startAgent(
    createKubernetesDriver({ kubeConfig: agentConfig, namespace }),
    { statsSamples: { intervalMs: 2_000 } },
    '127.0.0.1',
    createKubernetesProvisioner({ kubeConfig: agentConfig, namespace, agentUrl: 'http://agent:8000' }),
  );
  const browser = await launchChromium();
  t.teardown(async () => {
    await browser.close();
    await agent.close();
    await harness.close();
  });
  const bot = await harness.createBot({ logLines: ['hello from the cluster'] });
  const url = `http://127.0.0.1:${(agent.server.address() as { port: number }).port}`;
  const page = await browser.newPage();
  const problems = watchPage(page);
  await page.goto(`${url}/`);
  await page.locator(`tr[data-bot="${bot.id}"] .badge.running`).waitFor({ timeout: 60_000 });

  await page.locator(`tr[data-bot="${bot.id}"]`).getByRole('link').click();
  const log = page.getByTestId('log');
  await log.getByText('hello from the cluster').waitFor({ timeout: 30_000 });
  const core = adminKubeConfig().makeApiClient(CoreV1Api);
  const pods = await core.listNamespacedPod({ namespace, labelSelector: `${BOT_LABEL}=${bot.id}` });
  const pod = pods.items.find((item) => item.status?.phase === 'Running')?.metadata?.name ?? '';
  await execInPod(adminKubeConfig(), namespace, pod, ['sh', '-c', "echo 'printed on the cluster while the page was open' > /proc/1/fd/1"]);
  await log.getByText('printed on the cluster while the page was open').waitFor({ timeout: 5_000 });

  await page.getByRole('button', { name: 'Stop', exact: true }).click();
  await page.getByRole('button', { name: 'Yes, stop' }).click();
  await page.getByTestId('answer').getByText(/stopped/i).waitFor({ timeout: 90_000 });
  t.false(await harness.running(bot), 'the bot still runs after Stop');
  await page.getByRole('button', { name: 'Start', exact: true }).click();
  await page.getByRole('button', { name: 'Yes, start' }).click();
  await page.getByTestId('answer').getByText(/started/i).waitFor({ timeout: 90_000 });
  t.true(await eventually(() => harness.running(bot), 30_000, 200), 'the bot does not run after Start');
  t.deepEqual(problems, []);
});
