/**
 * `npm run bench` at a tiny size, as someone checking the harness before a
 * long run would: every section runs to the end through real dev servers,
 * worker processes and sandboxes, prints its tables, and its JSON says every
 * rollout succeeded with nothing left behind. No timing is asserted (the
 * numbers are the benchmark's to print, not a test's to judge).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const scratch = mkdtempSync(join(tmpdir(), 'bench-harness-test-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

interface PipelineRunJson {
  rollouts: number;
  ok: number;
  errors: number;
  leaks: number;
  finished: boolean;
}

test('npm run bench runs every section end to end and reports 0 errors and 0 leaks', { timeout: 600_000 }, async () => {
  const jsonFile = join(scratch, 'bench.json');
  const args = ['--sections', '1,2,3,4,5', '--cycles', '5', '--alive', '5', '--batches', '8', '--concurrency', '20', '--curve', '10,20', '--delay-ms', '100', '--sweep', 'spawn-in-worker', '--task-files', '1,300', '--json-file', jsonFile];
  const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>((done) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'bench/run.ts'), ...args], { cwd: root, env: { ...process.env, LOG_LEVEL: 'warn' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
  assert.equal(run.code, 0, `bench failed:\n${run.stderr.slice(-4000)}`);
  for (const heading of ['== 1. sandbox lifecycle', '== 2. orchestration overhead', '== 3. concurrency (20 rollouts at once', '== 4. scaling curve', '== 5. task version check']) {
    assert.ok(run.stdout.includes(heading), `the tables have section "${heading}"`);
  }

  const out = JSON.parse(readFileSync(jsonFile, 'utf8')) as {
    machine: { cores: number; temporalServer: string };
    section1: { leftover_sandboxes: number };
    section2: { rows: { batch: number; pipeline: PipelineRunJson; bare: { errors: number } }[]; fileDb: PipelineRunJson | null };
    section3: { runs: { setup: string; run: PipelineRunJson }[] };
    section4: { points: { concurrency: number; run: PipelineRunJson }[] };
    section5: { rows: { files: number; loadTask: { n: number }; cached: { n: number } }[] };
  };
  assert.ok(out.machine.cores >= 1 && out.machine.temporalServer !== 'unknown', 'the machine and the Temporal server are recorded');
  assert.equal(out.section1.leftover_sandboxes, 0, 'section 1 leaves no sandbox behind');

  const pipelineRuns: [string, PipelineRunJson][] = [
    ...out.section2.rows.map((r): [string, PipelineRunJson] => [`section 2 batch ${r.batch}`, r.pipeline]),
    ...(out.section2.fileDb ? [['section 2 file db', out.section2.fileDb] as [string, PipelineRunJson]] : []),
    ...out.section3.runs.map((r): [string, PipelineRunJson] => [`section 3 ${r.setup}`, r.run]),
    ...out.section4.points.map((p): [string, PipelineRunJson] => [`section 4 at ${p.concurrency}`, p.run]),
  ];
  assert.deepEqual(out.section3.runs.map((r) => r.setup).sort(), ['defaults', 'spawn-in-worker'], 'both spawn paths ran side by side');
  for (const [name, r] of pipelineRuns) {
    assert.equal(r.finished, true, `${name} finished`);
    assert.equal(r.errors, 0, `${name}: no errors`);
    assert.equal(r.ok, r.rollouts, `${name}: every rollout ok with reward 1`);
    assert.equal(r.leaks, 0, `${name}: nothing left behind`);
  }
  for (const r of out.section2.rows) assert.equal(r.bare.errors, 0, 'the bare baseline did the same work without errors');
  assert.deepEqual(out.section5.rows.map((r) => r.files), [1, 300]);
  for (const r of out.section5.rows) assert.ok(r.loadTask.n > 0 && r.cached.n > 0);
});
