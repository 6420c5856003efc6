/**
 * What an operator sees: headless Chromium opens the dev server's Temporal
 * Web UI, finds a finished batch's rollouts by search attribute, opens one and
 * checks that its activity summaries, its static summary and its outcome are
 * visible. Screenshots go to test-output/ for people to look at.
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Browser } from 'playwright-core';
import { launchChromium } from '../helpers/browser.js';
import { buildReport } from '../../client/report/batchReport.js';
import { reportHtml } from '../../client/report/reportHtml.js';
import { submitBatch } from '../../client/submitBatch.js';
import { startHarness, type Harness } from '../helpers/pipelineHarness.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const output = join(root, 'test-output');
let h: Harness;
let browser: Browser;

function uiUrl(): string {
  const url = process.env.TEMPORAL_UI_URL;
  assert.ok(url, 'TEMPORAL_UI_URL is set by `npm test` (test/run.ts starts the dev server with its Web UI)');
  return url;
}

before(async () => {
  mkdirSync(output, { recursive: true });
  h = await startHarness('ui');
  await h.startWorkers();
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await h.close();
});

test('the Web UI finds a batch by search attribute and shows a rollout with its summaries and outcome', { timeout: 300_000 }, async () => {
  const batchId = `ui-${Date.now()}`;
  const batch = await submitBatch(h.client, {
    batchId,
    tasks: [join(root, 'examples/tasks/write-greeting')],
    groupSize: 2,
    policy: { kind: 'scripted', script: 'mixed' },
    taskQueues: h.taskQueues,
  });
  for await (const group of batch.results()) assert.equal(group.status, 'complete');

  const page = await browser.newPage({ viewport: { width: 1600, height: 1400 } });
  const query = `RolloutBatch="${batchId}" AND WorkflowType="rollout" AND RolloutOutcomeClass="ok"`;
  await page.goto(`${uiUrl()}/namespaces/default/workflows?query=${encodeURIComponent(query)}`);
  const first = `rollout/${batchId}/write-greeting/0`;
  await page.getByText(first, { exact: true }).first().waitFor({ timeout: 60_000 });
  await page.getByText(`rollout/${batchId}/write-greeting/1`, { exact: true }).first().waitFor();
  await page.screenshot({ path: join(output, 'ui-batch-rollouts.png'), fullPage: true });

  await page.getByText(first, { exact: true }).first().click();
  await page.getByText('provisionSandbox • provision local sandbox (attempt 1)').waitFor({ timeout: 60_000 });
  for (const summary of ['runTool • turn 1: bash: bash /solution/solve.sh', 'verifyThenTeardown • verify (in-place), then teardown sandbox sbx-', 'policyStep • turn 2: policy scripted:mixed']) {
    await page.getByText(summary).waitFor();
  }
  const body = await page.locator('body').innerText();
  assert.match(body, /Completed/);
  assert.match(body, /"outcomeType": "submitted"/);
  assert.match(body, /"reward": 1/);
  await page.screenshot({ path: join(output, 'ui-rollout.png'), fullPage: true });

  await page.getByText('User Metadata', { exact: true }).click();
  // The UI renders the markdown summary inside a sandboxed iframe.
  await page.frameLocator('iframe').first().getByText('rollout 1 of 2 · write-greeting').waitFor({ timeout: 30_000 });
  await page.screenshot({ path: join(output, 'ui-rollout-metadata.png'), fullPage: true });

  // The batch report's HTML page renders on its own (no network) with all its charts.
  const groups = [];
  for await (const group of batch.results()) groups.push(group);
  const reportFile = join(output, 'report.html');
  writeFileSync(reportFile, reportHtml(buildReport(batchId, groups)));
  await page.goto(`file://${reportFile}`);
  await page.getByText('Mean reward per task (valid rollouts)').waitFor();
  assert.equal(await page.locator('svg').count(), 7);
  await page.screenshot({ path: join(output, 'report.png'), fullPage: true });
  await page.close();
});
