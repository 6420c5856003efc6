/**
 * The verifier red team of `rollout task check`, through the command line a
 * task author runs, on real local sandboxes: a deliberately foolable task
 * (its verifier decides by the test's exit status alone) is reported
 * exploitable by the exit-at-load exploit and the command exits 1; a sample
 * task that records its pass only after the last assertion resists every
 * exploit and the command exits 0.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { TaskCheckReport } from '../../activities/tasks/checkTask.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const scratch = mkdtempSync(join(tmpdir(), 'red-team-'));

function taskCheck(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [join(root, 'client/bin/rollout.js'), 'task', 'check', ...args], { cwd: scratch, env: { ...process.env, LOG_LEVEL: 'warn' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}

after(() => rmSync(scratch, { recursive: true, force: true }));

describe('rollout task check: the verifier red team', { timeout: 600_000 }, () => {
  test('a verifier that decides by exit status alone is reported exploitable by exit-at-load, naming it; exit 1; --json', async () => {
    const foolable = join(root, 'test/fixtures/tasks/foolable-exit-status');
    const table = await taskCheck([foolable]);
    assert.equal(table.code, 1, table.stderr);
    assert.match(table.stdout, /red team: EXPLOITABLE by exit-at-load:python/);
    assert.match(table.stdout, /exit-at-load:python +EXPLOITABLE +1 +os\._exit\(0\) at import planted in \/app\/calc\.py/);
    assert.match(table.stdout, /exploitable: foolable-exit-status/);

    const json = await taskCheck([foolable, '--json']);
    assert.equal(json.code, 1, json.stderr);
    const [report] = JSON.parse(json.stdout) as TaskCheckReport[];
    assert.ok(report && 'exploits' in report.redTeam, json.stdout);
    assert.equal(report.exploitable, true);
    assert.equal(report.passed, false);
    assert.deepEqual(report.redTeam.exploits.filter((e) => e.exploitable).map((e) => e.name), ['exit-at-load:python']);
    assert.ok(report.cases.every((c) => c.passed), 'the ordinary cases pass: only the red team catches it');
    assert.deepEqual(report.redTeam.survey.outputs, ['/app/calc.py'], 'the file the reference solution wrote is the expected output');
    const names = report.redTeam.exploits.map((e) => e.name);
    for (const kind of ['output-empty', 'output-huge', 'output-link', 'output-pipe']) assert.ok(names.includes(`${kind}:/app/calc.py`), `${kind} tried: ${names.join(', ')}`);
    assert.ok(names.includes('workspace-emptied'));
  });

  test('the fixed sample fix-median resists every exploit: exit 0', async () => {
    const result = await taskCheck([join(root, 'examples/tasks/fix-median'), '--json']);
    assert.equal(result.code, 0, result.stdout);
    const [report] = JSON.parse(result.stdout) as TaskCheckReport[];
    assert.ok(report && 'exploits' in report.redTeam);
    assert.equal(report.exploitable, false);
    assert.ok(report.redTeam.exploits.length >= 6, `every exploit ran: ${report.redTeam.exploits.map((e) => e.name).join(', ')}`);
    assert.ok(report.redTeam.exploits.every((e) => !e.exploitable && !e.notRun && (e.reward ?? 0) === 0));
  });
});
