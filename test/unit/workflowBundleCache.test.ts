/**
 * The workflow bundle cache: a second start with the same sources reuses the
 * bundle the first one built (no bundling), and a change to any workflow file
 * (even one imported by another) builds a new bundle with the new code.
 * Real bundling (bundleWorkflowCode) of a small workflow package in a temp dir.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';
import { cachedWorkflowBundle } from '../../workers/workflowBundleCache.js';

// Inside the checkout (test-output/ is ignored by git) so the bundler resolves @temporalio/workflow from node_modules.
const outputDir = resolve(dirname(fileURLToPath(import.meta.url)), '../../test-output');
mkdirSync(outputDir, { recursive: true });
const scratch = mkdtempSync(join(outputDir, 'bundle-cache-test-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

const src = join(scratch, 'src');
mkdirSync(join(src, 'workflows'), { recursive: true });
mkdirSync(join(src, 'shared'), { recursive: true });
writeFileSync(join(src, 'workflows', 'index.ts'), "import { GREETING } from '../shared/greeting.js';\nexport async function greet(): Promise<string> {\n  return GREETING;\n}\n");
const writeGreeting = (text: string): void => writeFileSync(join(src, 'shared', 'greeting.ts'), `export const GREETING = ${JSON.stringify(text)};\n`);
writeGreeting('hello-one');

const cacheDir = join(scratch, 'cache');
let builds = 0;
const options = {
  workflowsPath: join(src, 'workflows', 'index.ts'),
  sourceDirs: [join(src, 'workflows'), join(src, 'shared')],
  extraInputs: [join(src, 'no-lock-file.json')],
  buildOptions: { test: true },
  cacheDir,
  build: () => {
    builds++;
    return bundleWorkflowCode({ workflowsPath: join(src, 'workflows', 'index.ts'), logger: { trace() {}, debug() {}, info() {}, warn() {}, error() {}, log() {} } });
  },
};

test('the same sources are bundled once; a changed imported file is bundled again', async () => {
  const first = await cachedWorkflowBundle(options);
  assert.equal(first.built, true);
  assert.match(first.bundle.code, /hello-one/);
  assert.deepEqual(readdirSync(cacheDir), [`${first.key}.json`]);

  const second = await cachedWorkflowBundle(options);
  assert.equal(second.built, false, 'a second start with unchanged sources must reuse the cached bundle');
  assert.equal(builds, 1);
  assert.equal(second.key, first.key);
  assert.equal(second.bundle.code, first.bundle.code);
  assert.equal(second.bundle.sourceMap, first.bundle.sourceMap);

  writeGreeting('hello-two');
  const third = await cachedWorkflowBundle(options);
  assert.equal(third.built, true, 'a changed workflow source must be bundled again');
  assert.notEqual(third.key, first.key);
  assert.match(third.bundle.code, /hello-two/);
  assert.doesNotMatch(third.bundle.code, /hello-one/);
  assert.equal(builds, 2);
});

test('a corrupt cached bundle is rebuilt, not loaded', async () => {
  const good = await cachedWorkflowBundle(options);
  writeFileSync(good.path, '{"code": 1');
  const again = await cachedWorkflowBundle(options);
  assert.equal(again.built, true);
  assert.equal(again.bundle.code, good.bundle.code);
});
