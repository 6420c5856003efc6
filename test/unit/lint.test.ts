/**
 * The workflow sandbox rules are enforced by lint: these fixtures break them on
 * purpose and ESLint must reject each one with the rule that names the problem.
 */
import assert from 'node:assert/strict';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const fixtures = join(root, 'test/fixtures/lint-violations/workflows');

async function lintFixture(name: string): Promise<ESLint.LintResult> {
  // ignore: false lints the fixtures the main config skips; they get the workflow rules by path.
  const eslint = new ESLint({ cwd: root, ignore: false });
  const [result] = await eslint.lintFiles([join(fixtures, name)]);
  assert.ok(result, `no lint result for ${name}`);
  return result;
}

function ruleIds(result: ESLint.LintResult): string[] {
  return result.messages.filter((m) => m.severity === 2).map((m) => m.ruleId ?? `fatal: ${m.message}`);
}

test('lint rejects a workflow that imports node:fs', { timeout: 120_000 }, async () => {
  const result = await lintFixture('importsFs.ts');
  assert.deepEqual(ruleIds(result), ['@typescript-eslint/no-restricted-imports']);
  assert.match(result.messages[0]?.message ?? '', /no Node built-ins/);
});

test('lint rejects a workflow that imports fs without the node: prefix', { timeout: 120_000 }, async () => {
  const result = await lintFixture('importsBareFs.ts');
  assert.deepEqual(ruleIds(result), ['@typescript-eslint/no-restricted-imports']);
});

test('lint rejects a workflow that imports an activity implementation', { timeout: 120_000 }, async () => {
  const result = await lintFixture('importsActivityValue.ts');
  assert.deepEqual(ruleIds(result), ['@typescript-eslint/no-restricted-imports']);
  assert.match(result.messages[0]?.message ?? '', /as types only/);
});

test('lint rejects a workflow that imports a type of the engine (an engine room, not activities/)', { timeout: 120_000 }, async () => {
  const result = await lintFixture('importsEngineType.ts');
  assert.deepEqual(ruleIds(result), ['@typescript-eslint/no-restricted-imports']);
  assert.match(result.messages[0]?.message ?? '', /may not import the engine .*not even its types/);
});

test('lint rejects a workflow that calls the engine', { timeout: 120_000 }, async () => {
  const result = await lintFixture('importsEngineValue.ts');
  assert.deepEqual(ruleIds(result), ['@typescript-eslint/no-restricted-imports']);
  assert.match(result.messages[0]?.message ?? '', /may not import the engine/);
});

test('lint rejects a floating promise', { timeout: 120_000 }, async () => {
  const result = await lintFixture('floatingPromise.ts');
  assert.deepEqual(ruleIds(result), ['@typescript-eslint/no-floating-promises']);
});

test('lint accepts the type-only activity import of a real workflow file', { timeout: 120_000 }, async () => {
  const eslint = new ESLint({ cwd: root });
  const [result] = await eslint.lintFiles([join(root, 'test/fixtures/workflows/wiring.ts')]);
  assert.ok(result);
  assert.deepEqual(ruleIds(result), []);
});

test('lint rejects a line of code past 200 characters outside tests', { timeout: 120_000 }, async () => {
  const eslint = new ESLint({ cwd: root, ignore: false });
  const [result] = await eslint.lintFiles([join(root, 'test/fixtures/lint-violations/longLine.ts')]);
  assert.ok(result);
  assert.deepEqual(ruleIds(result), ['max-len']);
  assert.match(result.messages[0]?.message ?? '', /Maximum allowed is 200/);
});
