/**
 * What a person sees of one rollout in a browser: headless Chromium opens the
 * batch report written by `rollout report --html` from disk, follows a
 * rollout's link to its page (a rollout whose first sandbox was killed, so it
 * has a failed attempt), checks the turns, tool outputs, verifier output,
 * reward and outcome, that markup the agent printed is text and never runs,
 * and leaves screenshots in test-output/show-*.png.
 */
import assert from 'node:assert/strict';
import { mkdirSync, rmSync } from 'node:fs';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Browser } from 'playwright-core';
import { launchChromium } from '../helpers/browser.js';
import { submitBatch } from '../../client/submitBatch.js';
import type { GroupResult } from '../../shared/pipeline.js';
import { FaultyProvider } from '../helpers/faultyProvider.js';
import { makeNoisyTask, PLANTED_IMG, PLANTED_SCRIPT, PLANTED_TITLE } from '../helpers/noisyTask.js';
import { startHarness, type Harness } from '../helpers/pipelineHarness.js';
import { runRolloutCli } from '../helpers/rolloutCli.js';
import { testServerAddress } from '../helpers/temporal.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const output = join(root, 'test-output');
const pages = join(output, 'show');
const scratch = mkdtempSync(join(tmpdir(), 'rollout-pages-'));
let h: Harness;
let browser: Browser;
let group: GroupResult;
const batchId = `pages-${Date.now().toString(36)}`;

before(async () => {
  rmSync(pages, { recursive: true, force: true });
  mkdirSync(pages, { recursive: true });
  h = await startHarness('pages');
  let killed = false;
  const faulty = new FaultyProvider(h.provider, {
    killBeforeExec: (_h, command) => {
      if (killed || !command.includes('solve.sh')) return false;
      killed = true;
      return true;
    },
  });
  await h.startWorkers({ provider: faulty });
  const batch = await submitBatch(h.client, {
    batchId,
    tasks: [makeNoisyTask(scratch)],
    groupSize: 2,
    policy: { kind: 'scripted', script: 'mixed' },
    failurePolicy: { infra: { retries: 2, backoffSec: 0 } },
    taskQueues: h.taskQueues,
  });
  for await (const g of batch.results()) group = g;
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await h.close();
  rmSync(scratch, { recursive: true, force: true });
});

test('the report links every rollout to its page; the page shows turns, outputs, verifier, reward, outcome and the failed attempt', { timeout: 300_000 }, async () => {
  const reportFile = join(pages, 'report.html');
  const report = await runRolloutCli(['report', batchId, '--html', reportFile, '--trajectories', h.store.root, '--address', testServerAddress()], scratch);
  assert.equal(report.code, 0, report.stdout + report.stderr);
  assert.match(report.stdout, new RegExp(`^rollout pages: ${join(pages, 'report-rollouts')} \\(2\\)$`, 'm'));
  const retried = group.rollouts.find((r) => r.attempts === 2);
  assert.ok(retried, 'one rollout lost its first sandbox and was retried');

  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(e.message));
  await page.goto(pathToFileURL(reportFile).href);
  await page.getByRole('heading', { name: 'Rollouts' }).waitFor();
  for (const r of group.rollouts) assert.equal(await page.getByRole('link', { name: r.workflowId, exact: true }).count(), 1, `${r.workflowId} is linked`);
  await page.screenshot({ path: join(output, 'show-report.png'), fullPage: true });

  await page.getByRole('link', { name: retried.workflowId, exact: true }).click();
  await page.waitForURL(/report-rollouts\/noisy-greeting-\d\.html$/);
  const heading = page.getByRole('heading', { level: 1 });
  assert.equal(await heading.innerText(), retried.workflowId);
  const text = await page.locator('body').innerText();
  // The outcome and reward at the top, then both attempts.
  assert.match(text, new RegExp(`reward ${retried.reward}\\s+ok/submitted\\s+completed`));
  assert.match(text, /valid · advantage -?1\.000 · 2 attempts · 3 turns/);
  assert.match(text, /attempt 1 of 2 · infra\/sandbox_lost · no reward · 1 turn/);
  assert.match(text, /evidence: sandbox [a-z0-9-]+ (died during|is gone)/);
  assert.match(text, /no result recorded: the attempt ended before or during this call/);
  assert.match(text, new RegExp(`attempt 2 of 2 · ok/submitted · reward ${retried.reward} · 3 turns`));
  // Turns, each tool call with what came back.
  const attempt2 = page.locator('#attempt-2');
  assert.equal(await attempt2.locator('article.turn').count(), 3);
  const run = attempt2.locator('.call[data-tool="bash"]');
  assert.match(await run.locator('.call-head').innerText(), /^bash \$ bash \/solution\/solve\.sh$/);
  assert.match(await run.locator('.call-meta').innerText(), /^exit 0 · \d+ ms$/);
  assert.match(await attempt2.locator('.verify').innerText(), new RegExp(`Verifier \\(in-place\\)\\s*reward ${retried.reward} · test\\.sh exit 0[\\s\\S]*checking /app/greeting\\.txt\\n(PASS greeting matches|FAIL greeting differs)`));
  await page.screenshot({ path: join(output, 'show-rollout.png'), fullPage: true });

  // The oracle's page: a long stdout cut to its last 20 lines with the whole behind a fold, and the markup it printed as text.
  const oracle = group.rollouts.find((r) => r.index === 0);
  assert.ok(oracle);
  await page.goBack();
  await page.getByRole('link', { name: oracle.workflowId, exact: true }).click();
  await page.waitForURL(/noisy-greeting-0\.html$/);
  const solve = page.locator('section.attempt').last().locator('.call[data-tool="bash"]');
  const solveText = await solve.innerText();
  assert.match(solveText, /stdout 1\.\d KiB, 62 lines, showing last 20/);
  assert.match(solveText, /stderr 43 B, 1 line\nwarning: greeting written without a locale/);
  assert.ok(solveText.includes(PLANTED_SCRIPT) && solveText.includes(PLANTED_IMG), 'the markup the agent printed is shown as text');
  assert.notEqual(await page.title(), PLANTED_TITLE, 'and it did not run');
  assert.equal(await page.locator('script, img').count(), 0, 'no script or image element came from the output');
  assert.doesNotMatch(solveText, /build step 42 of 60/);
  await solve.getByText('show all of stdout (62 lines, 1.2 KiB)').click();
  const all = solve.locator('details[open] pre');
  await all.waitFor();
  assert.match(await all.innerText(), /^build step 1 of 60\n[\s\S]*\nbuild step 42 of 60\n/, 'unfolded, the whole stdout');
  await page.screenshot({ path: join(output, 'show-rollout-expanded.png'), fullPage: true });

  await page.getByRole('link', { name: `← batch ${batchId} report` }).click();
  await page.waitForURL(/show\/report\.html$/);
  assert.deepEqual(problems, [], 'no console errors (a blocked script would report one)');
  await page.close();
});
