/**
 * The verifier red team of `rollout task check`, through the command line a
 * task author runs, on real local sandboxes: a deliberately foolable task
 * (its verifier decides by the test's exit status alone) is reported
 * exploitable by the exit-at-load exploit and the command exits 1; a sample
 * task that records its pass only after the last assertion resists every
 * exploit and the command exits 0. An exploit that keeps the verifier busy
 * past its budget (from the honest runs) is inconclusive, not a 5-minute wait;
 * a collection ends with one table; a verifier that needs the outside world to
 * score is said to.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { connect } from 'node:net';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { TaskCheckReport } from '../../client/taskTools/checkTask.js';

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

  test('a reference solution that does its work and then exits 127 (its last tool is missing) scores 1, and the red team runs it exactly so: it surveys and tries every exploit, not "could not run"', async () => {
    const result = await taskCheck([join(root, 'test/fixtures/tasks/solution-exits-nonzero'), '--json']);
    const [report] = JSON.parse(result.stdout) as TaskCheckReport[];
    assert.ok(report, result.stderr);
    assert.deepEqual(report.cases.map((c) => [c.name, c.reward]), [['untouched start', 0], ['reference solution', 1]]);
    assert.match(report.cases[1]?.outputTail ?? '', /^solution \(exit 127\): .*tmux-that-is-not-installed: command not found/m);
    assert.ok('exploits' in report.redTeam, `the red team ran: ${JSON.stringify(report.redTeam)}`);
    assert.equal(report.redTeam.solutionExit, 127, 'the survey ran the same solution, with the same exit');
    assert.deepEqual(report.redTeam.survey.outputs, ['/app/calc.py'], 'and surveyed what it left');
    assert.ok(report.redTeam.exploits.length >= 6 && report.redTeam.exploits.every((e) => !e.notRun), report.redTeam.exploits.map((e) => `${e.name}: ${e.note}`).join('\n'));
    assert.equal(result.code, 0, result.stdout);
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

  test('--verify clean-room runs every case and exploit in a fresh sandbox holding only the workspace: a service the solution left running is gone there, and the check says where the tests ran', async () => {
    const serves = join(root, 'test/fixtures/tasks/serves-answer');
    const inPlace = await taskCheck([serves, '--json']);
    const [beside] = JSON.parse(inPlace.stdout) as TaskCheckReport[];
    assert.equal(inPlace.code, 0, inPlace.stdout + inPlace.stderr);
    assert.equal(beside?.verifyMode, 'in-place');
    assert.deepEqual(beside?.cases.map((c) => [c.name, c.reward]), [['untouched start', 0], ['reference solution', 1]], 'in place, the tests reach the server the solution left');

    const clean = await taskCheck([serves, '--verify', 'clean-room']);
    assert.equal(clean.code, 1, clean.stdout + clean.stderr);
    assert.match(clean.stdout, /^FAIL  serves-answer/m);
    assert.match(clean.stdout, /^  verify: clean-room \(each case's tests in a fresh sandbox holding only its workspace\)$/m);
    assert.match(clean.stdout, /^  BAD  reference solution +expected 1, reward 0$/m, 'the clean room has the files, not the server');
    assert.match(clean.stdout, /Connection refused/);
    assert.match(clean.stdout, /red team: no exploit scored above 0/);

    const refused = await taskCheck([serves, '--verify', 'sideways']);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /--verify is in-place or clean-room, got "sideways"/);
  });

  test('an exploit that keeps the verifier past its budget is inconclusive; several tasks end with one table', async () => {
    const slow = join(root, 'test/fixtures/tasks/slow-on-missing-answer');
    const result = await taskCheck([slow, join(root, 'examples/tasks/fix-median')]);
    assert.equal(result.code, 0, result.stdout + result.stderr);
    // Its honest runs (the start holds a wrong answer, the solution the right one) take about a second:
    // 60 s each (the least budget), not the task's 300 s.
    assert.match(result.stdout, /note \(budget 60 s each\)/);
    assert.match(result.stdout, /output-empty:\/app\/answer\.txt +inconclusive +- +inconclusive: the verifier ran past 60 s, this exploit's budget \(3x the slowest honest verification, at least 60 s; the task allows 300 s\)/);
    assert.match(result.stdout, /workspace-emptied +inconclusive/);
    // A pipe blocks its reader for good: it is cut by its own 10 s, and the note says so (not the task's timeout).
    assert.match(result.stdout, /output-pipe:\/app\/answer\.txt +resists +- +no reward \(the verifier was still running after 10 s, this exploit's own limit: a reader of a pipe nobody writes waits for good; the task allows 300 s;/);
    const table = result.stdout.slice(result.stdout.indexOf('\ntask '));
    assert.match(table, /^task +start +oracle +red team +network +build s +check s +check$/m);
    assert.match(table, /^slow-on-missing-answer +ok +ok +\d+\/\d+ resist, [23] inconclusive +none +- +\d+ +PASS$/m);
    assert.match(table, /^fix-median +ok +ok +\d+\/\d+ resist +none +- +\d+ +PASS$/m);
    assert.match(result.stdout, /2 of 2 tasks pass their check/);
  });

  test('a verifier that scores only while it reaches the outside world is said to need it; one that scores offline is not', async (t) => {
    if (!(await reaches('pypi.org', 443))) {
      t.skip('this host cannot reach pypi.org:443, which the fixture verifier needs');
      return;
    }
    const needs = await taskCheck([join(root, 'test/fixtures/tasks/needs-network-to-score'), '--json']);
    const [report] = JSON.parse(needs.stdout) as TaskCheckReport[];
    assert.ok(report, needs.stderr);
    assert.deepEqual(report.network, { mode: 'public', source: 'task.toml [environment].network_mode = "public"' });
    assert.equal(report.cases.find((c) => c.name === 'reference solution')?.reward, 1, JSON.stringify(report.cases));
    assert.equal(report.offlineVerifier?.needsNetwork, true, JSON.stringify(report.offlineVerifier));
    assert.match(report.offlineVerifier?.note ?? '', /scores 1 online but reward 0 with the network cut before the tests: the verifier needs the outside world/);

    const offline = await taskCheck([join(root, 'examples/tasks/fix-median'), '--network', 'public']);
    assert.equal(offline.code, 0, offline.stdout + offline.stderr);
    assert.match(offline.stdout, /network: public \(rollout task check --network public; the task's own: none, from task\.toml \[environment\]\.network_mode = "no-network"\)/);
    assert.match(offline.stdout, /verifier offline: the reference solution scores 1 with the network cut before the tests: the verdict does not depend on the outside world/);
  });

  test('a reference solution that cannot reach a host beyond the package registries is "needs the internet", not a broken task', async (t) => {
    if (await reaches('example.com', 443)) {
      t.skip('this host reaches example.com, so the fixture oracle passes and there is nothing to tell apart');
      return;
    }
    const dir = join(root, 'test/fixtures/tasks/needs-outside-host');
    const run = await taskCheck([dir, join(root, 'examples/tasks/write-greeting')]);
    assert.equal(run.code, 1, run.stdout + run.stderr);
    assert.match(run.stdout, /^NEEDS INTERNET {2}needs-outside-host /m);
    assert.match(run.stdout, /needs the internet beyond the package registries: its reference solution could not reach example\.com \(not a failure of the task or of the pipeline/);
    assert.match(run.stdout, /needs-outside-host .* NEEDS INTERNET \(example\.com\)\n/);
    assert.match(run.stdout, /1 of 2 tasks pass their check; 1 need the internet beyond the package registries \(needs-outside-host\)/);
    const [report] = JSON.parse((await taskCheck([dir, '--json'])).stdout) as TaskCheckReport[];
    assert.deepEqual(report?.needsInternet, { hosts: ['example.com'], stage: 'oracle' });
  });
});

/** Whether this host reaches host:port at all (else the outside-world case cannot be told). */
function reaches(host: string, port: number): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect({ host, port, timeout: 10_000 });
    socket.once('connect', () => {
      socket.destroy();
      done(true);
    });
    socket.once('timeout', () => {
      socket.destroy();
      done(false);
    });
    socket.once('error', () => done(false));
  });
}
