/**
 * Section 1: local sandbox lifecycle latency (provision, exec, teardown) over
 * N cycles, side by side with floors measured in the same run from the same
 * process, sampled in every cycle: a plain fork/exec of `true`, and a bare `bwrap ... true`. When the
 * compiled helper is there (ROLLOUT_EXEC_HELPER), the main cycles' sandboxes
 * have the exec server as init (sandboxes/local/helper/sandbox-init.c), each of their execs is paired
 * with one entered through the helper instead (what exec was before the exec
 * server), and every other cycle goes through the program chain the helper
 * replaces, so all stand beside the same floors of the same run. Then N sandboxes alive at once, with the memory each idle
 * one costs. Prints ratios, never asserts a time. Called by
 * `npm run bench:sandbox` and `npm run bench`.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalSandboxProvider } from '../sandboxes/local/localSandboxProvider.js';
import { localHandle, type SandboxHandle, type SandboxSpec } from '../shared/sandbox.js';
import { summarize, type Summary } from '../shared/stats.js';
import { memAvailableKb, sandboxProcessMemory } from './procStats.js';
import { formatTable } from './stats.js';

export interface SandboxLifecycleOptions {
  cycles: number;
  alive: number;
  log?: (line: string) => void;
  /** On top of the bench's host-base spec: an image's rootfs and env (bench:sandbox --image), a network. */
  spec?: Partial<SandboxSpec>;
}

export interface SandboxLifecycleResult {
  cycles: number;
  provision_p50_ms: number;
  provision_p95_ms: number;
  provision_p99_ms: number;
  exec_p50_ms: number;
  exec_p95_ms: number;
  exec_p99_ms: number;
  teardown_p50_ms: number;
  teardown_p95_ms: number;
  teardown_p99_ms: number;
  floor_fork_exec_true_p50_ms: number;
  floor_fork_exec_true_p95_ms: number;
  floor_fork_exec_true_p99_ms: number;
  floor_bwrap_true_p50_ms: number;
  floor_bwrap_true_p95_ms: number;
  floor_bwrap_true_p99_ms: number;
  /** The compiled helper the main rows used, or null (then they are the program chain, and no chain rows). */
  exec_helper: string | null;
  /** Execs of the main cycles' sandboxes entered through the helper's exec mode instead of the exec server, paired with them. */
  helper_exec: { exec: Summary; exec_over_fork_exec_floor: number } | null;
  /** The same cycles through the program chain (sh + nsenter + setpriv; unshare + mount script), interleaved with the main ones. */
  chain: { provision: Summary; exec: Summary; teardown: Summary; provision_over_bwrap_floor: number; exec_over_fork_exec_floor: number } | null;
  /**
   * The same cycles with a pool of ready sandboxes (max 2; refilled in the background during a
   * cycle's execs and teardown, and settled before the next cycle): provision as a rollout waits
   * for it, how often it found one ready, and how many the pool had made and never handed out.
   */
  pool: { provision: Summary; provision_over_bwrap_floor: number; hits: number; drained_unused: number };
  provision_over_bwrap_floor: number;
  exec_over_fork_exec_floor: number;
  teardown_over_fork_exec_floor: number;
  alive_at_once: number;
  alive_all_answer_exec: boolean;
  alive_provision_total_ms: number;
  alive_teardown_all_concurrently_ms: number;
  alive_processes_per_sandbox: number;
  idle_sandbox_pss_kb: number;
  /** The bwrap process outside each sandbox that waits for its init. */
  idle_sandbox_launcher_pss_kb: number;
  idle_sandbox_host_memory_kb: number;
  leftover_sandboxes: number;
}

function spawnTimed(argv: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(argv[0] as string, argv.slice(1), { stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(performance.now() - started) : reject(new Error(`${argv.join(' ')} exited ${code}`))));
  });
}


const BARE_BWRAP = [
  'bwrap',
  '--ro-bind',
  '/usr',
  '/usr',
  '--symlink',
  'usr/bin',
  '/bin',
  '--symlink',
  'usr/lib',
  '/lib',
  '--symlink',
  'usr/lib64',
  '/lib64',
  '--unshare-pid',
  '--unshare-net',
  '--unshare-ipc',
  '--unshare-uts',
  '--proc',
  '/proc',
  '--dev',
  '/dev',
  '--',
  '/bin/true',
];

export async function runSandboxLifecycle(options: SandboxLifecycleOptions): Promise<SandboxLifecycleResult> {
  const { cycles, alive: aliveCount } = options;
  const log = options.log ?? ((): void => undefined);
  const scratch = mkdtempSync(join(tmpdir(), 'sandbox-bench-'));
  const environmentDir = join(scratch, 'environment');
  mkdirSync(environmentDir);
  writeFileSync(join(environmentDir, 'main.py'), 'print("hello")\n');
  const provider = new LocalSandboxProvider({ stateRoot: join(scratch, 'state') });
  const chainProvider = provider.execHelper ? new LocalSandboxProvider({ stateRoot: join(scratch, 'state'), execHelper: null }) : null;
  const poolProvider = new LocalSandboxProvider({ stateRoot: join(scratch, 'state'), pool: { max: 2 } });
  const spec: SandboxSpec = { environmentDir, ...options.spec, owner: { workflowId: 'bench', runId: 'bench', attempt: 0 } };

  try {
    log(`sandbox lifecycle: ${cycles} cycles (3 execs each), then ${aliveCount} alive at once`);
    // The floors are sampled inside every cycle, beside what they are floors of: on a shared machine the
    // load changes within a run, and a ratio only means something when both sides saw the same load.
    const floors = { forkExec: [] as number[], bwrap: [] as number[] };

    const main = { provision: [] as number[], exec: [] as number[], teardown: [] as number[] };
    const chain = { provision: [] as number[], exec: [] as number[], teardown: [] as number[] };
    const pooled = { provision: [] as number[], exec: [] as number[], teardown: [] as number[] };
    const helperExec: number[] = [];
    let hits = 0;
    const cycle = async (p: LocalSandboxProvider, into: typeof main): Promise<void> => {
      let t = performance.now();
      const { handle } = await p.provision(spec);
      into.provision.push(performance.now() - t);
      const { execSocket, ...entered } = localHandle(handle);
      for (let k = 0; k < 3; k++) {
        t = performance.now();
        const r = await p.exec(handle, 'true');
        into.exec.push(performance.now() - t);
        if (r.exitCode !== 0) throw new Error(`exec failed: ${r.stderr}`);
        if (execSocket === undefined || into !== main) continue;
        t = performance.now();
        const e = await p.exec(entered, 'true');
        helperExec.push(performance.now() - t);
        if (e.exitCode !== 0) throw new Error(`exec through the helper failed: ${e.stderr}`);
      }
      t = performance.now();
      await p.teardown(handle);
      into.teardown.push(performance.now() - t);
    };
    for (let i = 0; i < cycles; i++) {
      for (let k = 0; k < 3; k++) floors.forkExec.push(await spawnTimed(['/bin/true']));
      floors.bwrap.push(await spawnTimed(BARE_BWRAP));
      await cycle(provider, main);
      if (chainProvider) await cycle(chainProvider, chain);
      if ((poolProvider.pool?.size ?? 0) > 0) hits++;
      await cycle(poolProvider, pooled);
      // The refill runs while the pool cycle's commands do; it must not run beside the next cycles measured.
      await poolProvider.pool?.settled();
    }
    const drainedUnused = poolProvider.pool?.size ?? 0;
    await poolProvider.close();
    const forkExec = summarize(floors.forkExec);
    const bareBwrap = summarize(floors.bwrap);
    const lifecycle = { provision: summarize(main.provision), exec: summarize(main.exec), teardown: summarize(main.teardown) };
    const chainLifecycle = chainProvider ? { provision: summarize(chain.provision), exec: summarize(chain.exec), teardown: summarize(chain.teardown) } : null;

    // Many alive at once: what each idle sandbox costs.
    const before = memAvailableKb();
    const alive: SandboxHandle[] = [];
    const aliveStart = performance.now();
    for (let i = 0; i < aliveCount; i++) alive.push((await provider.provision(spec)).handle);
    const aliveProvisionMs = performance.now() - aliveStart;
    const probe = await Promise.all(alive.slice(0, 10).map((h) => provider.exec(h, 'cat /proc/1/status >/dev/null && echo ok')));
    const allAnswer = probe.every((r) => r.stdout === 'ok\n');
    const after = memAvailableKb();
    const memory = sandboxProcessMemory(alive.map((h) => localHandle(h).pid));
    const teardownAllStart = performance.now();
    await Promise.all(alive.map((h) => provider.teardown(h)));
    const teardownAllMs = performance.now() - teardownAllStart;
    const leftover = await provider.list();

    return {
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
      floor_fork_exec_true_p99_ms: forkExec.p99,
      floor_bwrap_true_p50_ms: bareBwrap.p50,
      floor_bwrap_true_p95_ms: bareBwrap.p95,
      floor_bwrap_true_p99_ms: bareBwrap.p99,
      exec_helper: provider.execHelper,
      helper_exec: helperExec.length > 0 ? { exec: summarize(helperExec), exec_over_fork_exec_floor: summarize(helperExec).p50 / forkExec.p50 } : null,
      chain: chainLifecycle
        ? { ...chainLifecycle, provision_over_bwrap_floor: chainLifecycle.provision.p50 / bareBwrap.p50, exec_over_fork_exec_floor: chainLifecycle.exec.p50 / forkExec.p50 }
        : null,
      pool: { provision: summarize(pooled.provision), provision_over_bwrap_floor: summarize(pooled.provision).p50 / bareBwrap.p50, hits, drained_unused: drainedUnused },
      provision_over_bwrap_floor: lifecycle.provision.p50 / bareBwrap.p50,
      exec_over_fork_exec_floor: lifecycle.exec.p50 / forkExec.p50,
      teardown_over_fork_exec_floor: lifecycle.teardown.p50 / forkExec.p50,
      alive_at_once: aliveCount,
      alive_all_answer_exec: allAnswer,
      alive_provision_total_ms: aliveProvisionMs,
      alive_teardown_all_concurrently_ms: teardownAllMs,
      alive_processes_per_sandbox: memory.processes / Math.max(1, memory.sandboxes),
      idle_sandbox_pss_kb: memory.pssKb / Math.max(1, memory.sandboxes),
      idle_sandbox_launcher_pss_kb: memory.launcherPssKb / Math.max(1, memory.sandboxes),
      idle_sandbox_host_memory_kb: (before - after) / Math.max(1, aliveCount),
      leftover_sandboxes: leftover.length,
    };
  } finally {
    for (const record of await provider.list()) await provider.teardown(record.id).catch(() => undefined);
    rmSync(scratch, { recursive: true, force: true });
  }
}

export function formatSandboxLifecycle(r: SandboxLifecycleResult): string {
  const via = r.exec_helper ? (r.helper_exec ? ' (exec server)' : ' (helper)') : '';
  return [
    formatTable(
      ['operation', 'p50 ms', 'p95 ms', 'p99 ms', 'p50 / floor'],
      [
        ['floor: fork/exec true', r.floor_fork_exec_true_p50_ms, r.floor_fork_exec_true_p95_ms, r.floor_fork_exec_true_p99_ms, '1.00'],
        ['floor: bwrap ... true', r.floor_bwrap_true_p50_ms, r.floor_bwrap_true_p95_ms, r.floor_bwrap_true_p99_ms, '1.00'],
        [`provision${via}`, r.provision_p50_ms, r.provision_p95_ms, r.provision_p99_ms, `${r.provision_over_bwrap_floor.toFixed(2)} x bwrap`],
        [`exec true${via}`, r.exec_p50_ms, r.exec_p95_ms, r.exec_p99_ms, `${r.exec_over_fork_exec_floor.toFixed(2)} x fork/exec`],
        [`teardown${via}`, r.teardown_p50_ms, r.teardown_p95_ms, r.teardown_p99_ms, `${r.teardown_over_fork_exec_floor.toFixed(2)} x fork/exec`],
        ...(r.helper_exec ? [['exec true (helper exec, same sandboxes)', r.helper_exec.exec.p50, r.helper_exec.exec.p95, r.helper_exec.exec.p99, `${r.helper_exec.exec_over_fork_exec_floor.toFixed(2)} x fork/exec`]] : []),
        ...(r.chain
          ? [
              ['provision (program chain)', r.chain.provision.p50, r.chain.provision.p95, r.chain.provision.p99, `${r.chain.provision_over_bwrap_floor.toFixed(2)} x bwrap`],
              ['exec true (program chain)', r.chain.exec.p50, r.chain.exec.p95, r.chain.exec.p99, `${r.chain.exec_over_fork_exec_floor.toFixed(2)} x fork/exec`],
              ['teardown (program chain)', r.chain.teardown.p50, r.chain.teardown.p95, r.chain.teardown.p99, `${(r.chain.teardown.p50 / r.floor_fork_exec_true_p50_ms).toFixed(2)} x fork/exec`],
            ]
          : []),
        [`provision from the pool (${r.pool.hits}/${r.cycles} ready)`, r.pool.provision.p50, r.pool.provision.p95, r.pool.provision.p99, `${r.pool.provision_over_bwrap_floor.toFixed(2)} x bwrap`],
      ],
    ),
    `pool: ${r.pool.drained_unused} ready sandbox(es) made and never handed out, torn down at close`,
    r.exec_helper ? `helper: ${r.exec_helper}; program-chain cycles interleaved with the helper's` : 'no compiled helper (ROLLOUT_EXEC_HELPER unset): the rows are the program chain',
    '',
    `${r.alive_at_once} sandboxes alive at once: provisioned one after another in ${r.alive_provision_total_ms.toFixed(0)} ms, all answer exec: ${r.alive_all_answer_exec}`,
    `  per idle sandbox: ${r.alive_processes_per_sandbox.toFixed(1)} processes inside, PSS ${r.idle_sandbox_pss_kb.toFixed(0)} KiB (+ ${r.idle_sandbox_launcher_pss_kb.toFixed(0)} KiB for the bwrap outside that waits for it), host MemAvailable drop ${r.idle_sandbox_host_memory_kb.toFixed(0)} KiB`,
    `  concurrent teardown of all: ${r.alive_teardown_all_concurrently_ms.toFixed(0)} ms; sandboxes left: ${r.leftover_sandboxes}`,
  ].join('\n');
}
