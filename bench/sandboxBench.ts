/**
 * `npm run bench:sandbox [-- --json] [-- --cycles N] [-- --alive N]`
 *
 * Local sandbox lifecycle latency (provision, exec, teardown) over N cycles,
 * side by side with floors measured in the same run from the same process:
 * a plain fork/exec of `true`, and a bare `bwrap ... true`. Then N sandboxes
 * alive at once, with the memory each idle one costs. Prints ratios, never
 * asserts a time.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { LocalSandboxProvider } from '../activities/sandbox/local/localSandboxProvider.js';
import { processesInNamespace, namespaceOf } from '../activities/sandbox/local/procfs.js';
import { localHandle, type SandboxHandle } from '../shared/sandbox.js';
import { summarize, type Summary } from '../shared/stats.js';
import { formatTable, machineFacts } from './stats.js';

const { values } = parseArgs({
  options: { json: { type: 'boolean', default: false }, cycles: { type: 'string', default: '200' }, alive: { type: 'string', default: '200' } },
});
const cycles = Number(values.cycles);
const aliveCount = Number(values.alive);
const log = values.json ? (): void => undefined : (line: string): void => console.log(line);

function spawnTimed(argv: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(argv[0] as string, argv.slice(1), { stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(performance.now() - started) : reject(new Error(`${argv.join(' ')} exited ${code}`))));
  });
}

async function floor(argv: string[], n: number): Promise<Summary> {
  const samples: number[] = [];
  for (let i = 0; i < n; i++) samples.push(await spawnTimed(argv));
  return summarize(samples);
}

function memAvailableKb(): number {
  const line = readFileSync('/proc/meminfo', 'utf8').split('\n').find((l) => l.startsWith('MemAvailable:'));
  return Number(line?.split(/\s+/)[1] ?? 0);
}

function pssKb(pid: number): number {
  try {
    const line = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8').split('\n').find((l) => l.startsWith('Pss:'));
    return Number(line?.split(/\s+/)[1] ?? 0);
  } catch {
    return 0;
  }
}

const scratch = mkdtempSync(join(tmpdir(), 'sandbox-bench-'));
const environmentDir = join(scratch, 'environment');
const stateRoot = join(scratch, 'state');
mkdirSync(environmentDir);
writeFileSync(join(environmentDir, 'main.py'), 'print("hello")\n');
const provider = new LocalSandboxProvider({ stateRoot });
const spec = { environmentDir, owner: { workflowId: 'bench', runId: 'bench', attempt: 0 } };

try {
  log(`sandbox lifecycle benchmark: ${cycles} cycles, ${aliveCount} alive at once`);
  const forkExec = await floor(['/bin/true'], cycles);
  const bareBwrap = await floor(
    ['bwrap', '--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--unshare-pid', '--unshare-net', '--unshare-ipc', '--unshare-uts', '--proc', '/proc', '--dev', '/dev', '--', '/bin/true'],
    cycles,
  );

  const provision: number[] = [];
  const exec: number[] = [];
  const teardown: number[] = [];
  for (let i = 0; i < cycles; i++) {
    let t = performance.now();
    const { handle } = await provider.provision(spec);
    provision.push(performance.now() - t);
    for (let k = 0; k < 3; k++) {
      t = performance.now();
      const r = await provider.exec(handle, 'true');
      exec.push(performance.now() - t);
      if (r.exitCode !== 0) throw new Error(`exec failed: ${r.stderr}`);
    }
    t = performance.now();
    await provider.teardown(handle);
    teardown.push(performance.now() - t);
  }
  const lifecycle = { provision: summarize(provision), exec: summarize(exec), teardown: summarize(teardown) };

  // Many alive at once: what each idle sandbox costs.
  const before = memAvailableKb();
  const alive: SandboxHandle[] = [];
  const aliveStart = performance.now();
  for (let i = 0; i < aliveCount; i++) alive.push((await provider.provision(spec)).handle);
  const aliveProvisionMs = performance.now() - aliveStart;
  const probe = await Promise.all(alive.slice(0, 10).map((h) => provider.exec(h, 'cat /proc/1/status >/dev/null && echo ok')));
  const allAnswer = probe.every((r) => r.stdout === 'ok\n');
  const after = memAvailableKb();
  let pss = 0;
  let processes = 0;
  for (const h of alive) {
    const ns = namespaceOf(localHandle(h).pid, 'pid');
    const pids = ns ? processesInNamespace('pid', ns) : [];
    processes += pids.length;
    for (const pid of pids) pss += pssKb(pid);
  }
  const teardownAllStart = performance.now();
  await Promise.all(alive.map((h) => provider.teardown(h)));
  const teardownAllMs = performance.now() - teardownAllStart;
  const leftover = await provider.list();

  const result = {
    machine: machineFacts(),
    cycles,
    provision_p50_ms: lifecycle.provision.p50,
    provision_p95_ms: lifecycle.provision.p95,
    provision_p99_ms: lifecycle.provision.p99,
    exec_p50_ms: lifecycle.exec.p50,
    exec_p95_ms: lifecycle.exec.p95,
    exec_p99_ms: lifecycle.exec.p99,
    teardown_p50_ms: lifecycle.teardown.p50,
    teardown_p95_ms: lifecycle.teardown.p95,
    teardown_p99_ms: lifecycle.teardown.p99,
    floor_fork_exec_true_p50_ms: forkExec.p50,
    floor_fork_exec_true_p95_ms: forkExec.p95,
    floor_bwrap_true_p50_ms: bareBwrap.p50,
    floor_bwrap_true_p95_ms: bareBwrap.p95,
    provision_over_bwrap_floor: lifecycle.provision.p50 / bareBwrap.p50,
    exec_over_fork_exec_floor: lifecycle.exec.p50 / forkExec.p50,
    alive_at_once: aliveCount,
    alive_all_answer_exec: allAnswer,
    alive_provision_total_ms: aliveProvisionMs,
    alive_teardown_all_concurrently_ms: teardownAllMs,
    alive_processes_per_sandbox: processes / Math.max(1, aliveCount),
    idle_sandbox_pss_kb: pss / Math.max(1, aliveCount),
    idle_sandbox_host_memory_kb: (before - after) / Math.max(1, aliveCount),
    leftover_sandboxes: leftover.length,
  };

  if (values.json) {
    console.log(JSON.stringify(result, null, 2));
  } else {
    log('');
    log(
      formatTable(
        ['operation', 'p50 ms', 'p95 ms', 'p99 ms', 'p50 / floor'],
        [
          ['floor: fork/exec true', forkExec.p50, forkExec.p95, forkExec.p99, '1.00'],
          ['floor: bwrap ... true', bareBwrap.p50, bareBwrap.p95, bareBwrap.p99, '1.00'],
          ['provision', lifecycle.provision.p50, lifecycle.provision.p95, lifecycle.provision.p99, `${result.provision_over_bwrap_floor.toFixed(2)} x bwrap`],
          ['exec true', lifecycle.exec.p50, lifecycle.exec.p95, lifecycle.exec.p99, `${result.exec_over_fork_exec_floor.toFixed(2)} x fork/exec`],
          ['teardown', lifecycle.teardown.p50, lifecycle.teardown.p95, lifecycle.teardown.p99, ''],
        ],
      ),
    );
    log('');
    log(`${aliveCount} sandboxes alive at once: provisioned in ${aliveProvisionMs.toFixed(0)} ms, all answer exec: ${allAnswer}`);
    log(`  per idle sandbox: ${result.alive_processes_per_sandbox.toFixed(1)} processes, PSS ${result.idle_sandbox_pss_kb.toFixed(0)} KiB, host MemAvailable drop ${result.idle_sandbox_host_memory_kb.toFixed(0)} KiB`);
    log(`  concurrent teardown of all: ${teardownAllMs.toFixed(0)} ms; sandboxes left: ${leftover.length}`);
    log(`machine: ${JSON.stringify(result.machine)}`);
  }
} finally {
  for (const record of await provider.list()) await provider.teardown(record.id).catch(() => undefined);
  rmSync(scratch, { recursive: true, force: true });
}
