/**
 * A worker that dies mid-build leaves no build process behind: its podman
 * build dies with it (the guard's parent-death signal), and when the guard
 * died too, the next process that builds kills what is left of the recorded
 * group. Real `rollout env build` processes, killed with SIGKILL while podman
 * runs a RUN step. Needs scripts/ensure-image-tools.sh (ROLLOUT_IMAGE_TOOLS).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { runningDir } from '../../images/buildProcesses.js';
import { imageTools, runTool } from '../../images/imageTools.js';
import { eventually } from '../helpers/eventually.js';
import { processesMentioning } from '../helpers/localSandboxInspector.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const fixture = join(root, 'test/fixtures/image-task');
const noTools = process.env.ROLLOUT_IMAGE_TOOLS ? undefined : 'needs image tools: run scripts/ensure-image-tools.sh and export the ROLLOUT_IMAGE_TOOLS it prints';

/** A task whose build runs `sleep 600` in a RUN step, named by a marker no other process has. */
function sleepingTask(scratch: string, marker: string): string {
  // The directory (on the worker's command line) must not name the marker: only the RUN step's shell does.
  const dir = join(scratch, `task-${readdirSync(scratch).length}`);
  mkdirSync(join(dir, 'environment'), { recursive: true });
  cpSync(join(fixture, 'task.toml'), join(dir, 'task.toml'));
  cpSync(join(fixture, 'tests'), join(dir, 'tests'), { recursive: true });
  writeFileSync(join(dir, 'instruction.md'), 'Nothing to do.\n');
  writeFileSync(join(dir, 'environment/Dockerfile'), `FROM python:3.13-slim-bookworm\nRUN sleep 600 && echo ${marker}\n`);
  return dir;
}

function envBuild(dir: string): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', join(root, 'client/cli/main.ts'), 'env', 'build', dir], { cwd: root, stdio: ['ignore', 'ignore', 'pipe'], env: process.env });
}

async function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  return new Promise((r) => child.once('exit', (code) => r(code)));
}

const guardOf = (workerPid: number): number | undefined => {
  const dir = runningDir(imageTools().cacheDir);
  for (const name of readdirSync(dir)) {
    try {
      const record = JSON.parse(readFileSync(join(dir, name), 'utf8')) as { pgid: number; owner: { pid: number }; command: string };
      if (record.owner.pid === workerPid && record.command.startsWith('podman build')) return record.pgid;
    } catch {
      // forgotten meanwhile
    }
  }
  return undefined;
};

const recordsOf = (workerPid: number): string[] => {
  const dir = runningDir(imageTools().cacheDir);
  return readdirSync(dir).filter((name) => {
    try {
      return (JSON.parse(readFileSync(join(dir, name), 'utf8')) as { owner: { pid: number } }).owner.pid === workerPid;
    } catch {
      return false;
    }
  });
};

/** podman's storage-only containers (a build's working containers), by name. */
async function workingContainers(): Promise<string[]> {
  const listed = await runTool(imageTools(), 'podman', ['ps', '--all', '--external', '--format', 'json']);
  assert.equal(listed.code, 0, listed.tail);
  return (JSON.parse(listed.stdout || '[]') as { Names?: string[]; Id: string; State?: string }[]).filter((c) => c.State === 'storage').map((c) => c.Names?.[0] ?? c.Id);
}

/** Overlay mounts under the image cache's container storage. */
function storageMounts(): string[] {
  const storage = join(imageTools().cacheDir, '..', 'containers', 'storage');
  return readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[1] ?? '')
    .filter((target) => target.startsWith(resolve(storage)) && target.endsWith('/merged'));
}

if (noTools) {
  test('build processes die with their worker', { skip: noTools }, () => undefined);
} else {
  const scratch = mkdtempSync(join(tmpdir(), 'build-orphans-'));
  after(() => rmSync(scratch, { recursive: true, force: true }));

  describe('build processes die with their worker', { timeout: 900_000 }, () => {
    for (const guardKilledToo of [false, true]) {
      const how = guardKilledToo ? 'the worker and its build guard are SIGKILLed together: the next start kills the rest' : 'the worker is SIGKILLed: its podman build dies with it, what its RUN step started by the next start';
      test(how, async () => {
        const before = { containers: await workingContainers(), mounts: storageMounts() };
        const marker = `rollout-orphan-${randomBytes(6).toString('hex')}`;
        const dir = sleepingTask(scratch, marker);
        const worker = envBuild(dir);
        let stderr = '';
        worker.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
        // The RUN step is running once its shell (which names the marker) is up.
        await eventually(async () => processesMentioning(marker).length, (n) => n > 0 || worker.exitCode !== null, `podman runs the RUN step of ${dir}`, 600_000);
        assert.equal(worker.exitCode, null, `the build is still running: ${stderr}`);
        const workerPid = worker.pid as number;
        const guard = guardOf(workerPid);
        assert.ok(guard !== undefined, 'the build group is recorded with the worker as its owner');
        if (guardKilledToo) process.kill(guard, 'SIGKILL');
        worker.kill('SIGKILL');
        await exited(worker);
        if (guardKilledToo) {
          // Nothing ended the build: it is still there until a next start (which is what this case checks).
          await new Promise((r) => setTimeout(r, 2_000));
          assert.ok(processesMentioning(marker).length > 0, 'with its guard gone the build outlives the worker until the next start');
        }
        // The next start: another build on this host (the fixture's image; a cache hit once built).
        const next = envBuild(fixture);
        let nextErr = '';
        next.stderr?.on('data', (d: Buffer) => (nextErr += d.toString()));
        assert.equal(await exited(next), 0, `the next build runs: ${nextErr}`);
        const left = await eventually(async () => [...processesMentioning(marker), ...processesMentioning(dir)], (p) => p.length === 0, 'no process of the killed build is left', 20_000);
        assert.deepEqual(left, []);
        assert.deepEqual(recordsOf(workerPid), [], 'the dead worker’s build records are gone');
        // Nor anything of it in podman's storage: its working containers and their overlay mounts.
        assert.deepEqual((await workingContainers()).filter((c) => !before.containers.includes(c)), [], 'no working container of the killed build is left');
        assert.deepEqual(storageMounts().filter((m) => !before.mounts.includes(m)), [], 'no overlay mount of the killed build is left');
      });
    }
  });
}

describe('a build tool that exits without reading its input', { skip: noTools ?? false, timeout: 120_000 }, () => {
  test('is its exit status, not this process dying of EPIPE', async () => {
    // 8 MiB to a tool that reads none: the pipe fills, the tool exits, the rest of the write fails with EPIPE.
    const r = await runTool(imageTools(), 'sh', ['-c', 'exit 3'], { input: 'x'.repeat(8 * 1024 * 1024) });
    assert.equal(r.code, 3);
    const again = await runTool(imageTools(), 'sh', ['-c', 'head -c 1 >/dev/null; echo read-one'], { input: 'y'.repeat(8 * 1024 * 1024) });
    assert.deepEqual([again.code, again.stdout], [0, 'read-one\n']);
  });
});
