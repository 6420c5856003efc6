/**
 * The local provider (namespaces + overlayfs) against the shared conformance
 * suite, plus what only the local provider has: re-attach from another
 * process, the capability check, limit reporting and the rlimit fallback.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LocalSandboxProvider } from '../../sandboxes/local/localSandboxProvider.js';
import { SPAWN_VIA } from '../../sandboxes/local/sandboxSpawner.js';
import { isSameProcess } from '../../sandboxes/local/procfs.js';
import { NETWORK_PID_FILE } from '../../sandboxes/local/userNetwork.js';
import { localHandle, type SandboxSpec } from '../../shared/sandbox.js';
import { sandboxConformanceSuite, type ConformanceTarget } from '../conformance/sandboxConformance.js';
import { hostBait } from '../conformance/hostBait.js';
import { LocalSandboxInspector } from '../helpers/localSandboxInspector.js';
import { eventually } from '../helpers/eventually.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const scratch = mkdtempSync(join(tmpdir(), 'local-sandbox-test-'));
const stateRoot = join(scratch, 'state');
const environmentDir = join(scratch, 'environment');
mkdirSync(environmentDir);
writeFileSync(join(environmentDir, 'start.txt'), 'hello\n');

const bait = hostBait('conformance', scratch);

const provider = new LocalSandboxProvider({ stateRoot });
const inspector = new LocalSandboxInspector();

function spec(overrides: Partial<SandboxSpec> = {}): SandboxSpec {
  return { environmentDir, owner: { workflowId: 'conformance', runId: 'run', attempt: 0 }, ...overrides };
}

before(async () => {
  await bait.plant();
});

after(async () => {
  await bait.remove();
  rmSync(scratch, { recursive: true, force: true });
});

const target = (): ConformanceTarget => ({
  provider,
  spec,
  track: (h) => inspector.track(h),
  leftovers: (h) => inspector.leftovers(h),
  secrets: { files: bait.secretFiles, envValue: bait.secretValue, hostPaths: [root, scratch, '/home', '/root/.cache'] },
  hostPorts: [Number(process.env.TEMPORAL_ADDRESS?.split(':')[1] ?? 7233), bait.port()],
});

sandboxConformanceSuite('local', target);

const cmdline = (pid: number): string => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
};
function childrenOf(parent: number): number[] {
  return readdirSync('/proc')
    .map(Number)
    .filter((pid) => {
      if (!Number.isInteger(pid)) return false;
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === parent;
      } catch {
        return false;
      }
    });
}
function parentOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return 0;
  }
}
function ancestorsOf(pid: number): number[] {
  const out: number[] = [];
  for (let p = parentOf(pid); p > 1; p = parentOf(p)) out.push(p);
  return out;
}
/** Host pids of the bash that runs `command` inside a sandbox (exec passes the command as an argument). */
const processesRunning = (command: string): number[] =>
  readdirSync('/proc')
    .map(Number)
    .filter((pid) => Number.isInteger(pid) && cmdline(pid).includes('eval "$2" bash') && cmdline(pid).endsWith(` ${command} `));
const brokersOf = (parent: number): number[] => childrenOf(parent).filter((pid) => cmdline(pid).includes('spawnBroker.ts'));

describe('local sandbox provider', { timeout: 300_000 }, () => {
  test('a host-network sandbox can reach host ports (the opt-in works, so the default really isolates)', async () => {
    const { handle } = await provider.provision(spec({ network: 'host' }));
    try {
      const r = await provider.exec(handle, `exec 3<>/dev/tcp/127.0.0.1/${bait.port()}; cat <&3`, { timeoutMs: 5_000 });
      assert.equal(r.stdout, 'host service\n');
    } finally {
      await provider.teardown(handle);
    }
  });

  test('nothing inside ends the sandbox: kill -9 -1 and signals to its init leave it alive; a kill from the host is evidence of the host', async () => {
    const { handle } = await provider.provision(spec());
    try {
      await provider.exec(handle, '(setsid sleep 600 >/dev/null 2>&1 &); sleep 0.2');
      const killed = await provider.exec(handle, 'kill -9 -1; for s in TERM INT HUP QUIT USR1 ALRM KILL STOP; do kill -s $s 1; done; echo survived');
      assert.match(killed.stdout, /survived/);
      assert.equal((await provider.exec(handle, 'echo alive')).stdout, 'alive\n', 'the sandbox still runs commands');
      const ps = await provider.exec(handle, 'sleep 1.5; ps -eo pid=,stat=,comm=');
      assert.doesNotMatch(ps.stdout, /sleep +600|\bZ\b/, `the agent's processes are gone and no zombie is left: ${ps.stdout}`);
      process.kill(localHandle(handle).pid, 'SIGKILL');
      await eventually(() => provider.list(), (l) => !l.find((r) => r.id === handle.id)?.alive, 'the init is gone');
      await assert.rejects(provider.exec(handle, 'true'), /infra\/sandbox_lost|is gone/);
      const loss = await provider.lossEvidence(handle);
      assert.deepEqual([loss.tornDownByHost, loss.initEnd], [false, { kind: 'signal', signal: 'SIGKILL' }], 'the host holds the record and how the init ended');
      assert.ok(loss.oomKills === null || loss.oomKills === 0, `no OOM kill: ${loss.oomKills}`);
    } finally {
      await provider.teardown(handle);
    }
    assert.equal((await provider.lossEvidence(handle)).tornDownByHost, true, 'after teardown the record is gone');
  });

  test('another process re-attaches to a live sandbox from its JSON handle', async () => {
    const { handle } = await provider.provision(spec());
    try {
      await provider.exec(handle, 'echo left-by-first-process > /app/note; (setsid sleep 777 >/dev/null 2>&1 &)');
      const script = `
        import { LocalSandboxProvider } from ${JSON.stringify(join(root, 'sandboxes/local/localSandboxProvider.ts'))};
        const handle = JSON.parse(process.argv[1]);
        const p = new LocalSandboxProvider({ stateRoot: ${JSON.stringify(stateRoot)} });
        const r = await p.exec(handle, 'cat /app/note; ps -eo args | grep -c "^sleep 777"');
        process.stdout.write(r.stdout);
      `;
      const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, JSON.stringify(handle)], {
        cwd: root,
        encoding: 'utf8',
        timeout: 60_000,
      });
      assert.equal(child.status, 0, child.stderr);
      assert.equal(child.stdout, 'left-by-first-process\n1\n');
    } finally {
      await provider.teardown(handle);
    }
  });

  for (const [way, execHelper] of [['the exec server', undefined], ['the program chain', null]] as const) {
    test(`a keyed command left running by a worker that was SIGKILLed never runs beside its retry (${way})`, async () => {
      const launcher = new LocalSandboxProvider({ stateRoot, execHelper, notice: () => undefined });
      const { handle } = await launcher.provision(spec());
      const served = localHandle(handle).execSocket !== undefined;
      assert.equal(served, execHelper === undefined && process.env.ROLLOUT_EXEC_HELPER !== undefined, 'the sandbox has an exec server exactly when the helper launched it');
      try {
        // A worker process starts the command under a key, then dies without a chance to clean up.
        const script = `
          import { LocalSandboxProvider } from ${JSON.stringify(join(root, 'sandboxes/local/localSandboxProvider.ts'))};
          const p = new LocalSandboxProvider({ stateRoot: ${JSON.stringify(stateRoot)} });
          void p.exec(JSON.parse(process.argv[1]), 'sleep 61; echo late >> /app/log', { key: 'attempt-00/turn-0001/call-00' });
          setTimeout(() => process.kill(process.pid, 'SIGKILL'), 1500);
        `;
        const dead = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, JSON.stringify(handle)], { cwd: root, encoding: 'utf8', timeout: 60_000 });
        assert.equal(dead.signal, 'SIGKILL', dead.stderr);
        const orphan = await eventually(() => launcher.exec(handle, 'ps -eo args | grep -c "^sleep 61"'), (r) => r.stdout.trim() === (served ? '0' : '1'), served ? 'the init killed the command when the dead worker\'s connection closed' : 'the dead worker left its command running', 5_000);
        assert.equal(orphan.stdout.trim(), served ? '0' : '1');
        // The retry (same key) runs alone.
        const retry = await launcher.exec(handle, 'ps -eo args | grep -c "^sleep 61"; echo retried >> /app/log', { key: 'attempt-00/turn-0001/call-00' });
        assert.equal(retry.stdout.trim(), '0', 'the orphaned command was killed before the retry ran');
        const log = await launcher.exec(handle, 'cat /app/log');
        assert.equal(log.stdout, 'retried\n');
      } finally {
        await launcher.teardown(handle);
      }
    });
  }

  test('a keyed command still running in a live worker is killed before another worker runs its retry (exec server)', async () => {
    const { handle } = await provider.provision(spec());
    try {
      // Two providers stand for two workers: the first still runs the command when the retry comes.
      const other = new LocalSandboxProvider({ stateRoot });
      const key = 'attempt-00/turn-0002/call-00';
      const first = provider.exec(handle, 'echo started; sleep 62; echo late >> /app/log', { key });
      await eventually(() => provider.exec(handle, 'ps -eo args | grep -c "^sleep 62"'), (r) => r.stdout.trim() === '1', 'the first command runs', 10_000);
      const retry = await other.exec(handle, 'ps -eo args | grep -c "^sleep 62"; echo retried >> /app/log', { key });
      assert.equal(retry.stdout.trim(), '0', 'the first run was killed before the retry ran');
      const firstResult = await first;
      assert.equal(firstResult.exitCode, 137, 'the superseded command ended by SIGKILL');
      assert.equal(firstResult.stdout, 'started\n');
      assert.equal((await provider.exec(handle, 'cat /app/log')).stdout, 'retried\n');
    } finally {
      await provider.teardown(handle);
    }
  });

  test('aborting a command (its activity was cancelled) kills it and rejects with the abort reason', async () => {
    const { handle } = await provider.provision(spec());
    try {
      const controller = new AbortController();
      const running = provider.exec(handle, 'sleep 62', { signal: controller.signal });
      await new Promise((r) => setTimeout(r, 500));
      controller.abort(new Error('activity cancelled'));
      await assert.rejects(running, /activity cancelled/);
      const left = await provider.exec(handle, 'ps -eo args | grep -c "^sleep 62"');
      assert.equal(left.stdout.trim(), '0');
    } finally {
      await provider.teardown(handle);
    }
  });

  test('provision reports which limits the host enforces, and how', async () => {
    const { handle, enforcedLimits } = await provider.provision(spec({ limits: { memoryMb: 128, pids: 100, cpus: 0.5 } }));
    try {
      assert.match(enforcedLimits.memory, /^cgroup-v[12]$/);
      assert.match(enforcedLimits.pids, /^cgroup-v[12]$/);
      assert.match(enforcedLimits.cpu, /^cgroup-v[12]$/);
      assert.equal(enforcedLimits.disk, 'tmpfs-size');
    } finally {
      await provider.teardown(handle);
    }
  });

  test('without writable cgroups, memory falls back to an rlimit and the rest is reported as not enforced', async () => {
    const noCgroups = new LocalSandboxProvider({ stateRoot, cgroupRoot: join(scratch, 'no-cgroups-here') });
    const { handle, enforcedLimits } = await noCgroups.provision(spec({ limits: { memoryMb: 64, pids: 50 } }));
    try {
      assert.deepEqual(enforcedLimits, { memory: 'rlimit', pids: 'not-enforced', cpu: 'not-requested', disk: 'tmpfs-size' });
      const hog = await noCgroups.exec(handle, "python3 -c \"b = bytearray(512 * 1024 * 1024); print('allocated')\"");
      assert.notEqual(hog.exitCode, 0);
      assert.match(hog.stderr, /MemoryError/);
    } finally {
      await noCgroups.teardown(handle);
    }
    assert.deepEqual(await inspector.leftovers(handle), { processes: [], mounts: [], directories: [], other: [] });
  });

  test('a public sandbox without cgroups to hold its slirp4netns: teardown kills it all the same', async () => {
    const noCgroups = new LocalSandboxProvider({ stateRoot, cgroupRoot: join(scratch, 'no-cgroups-here') });
    const { handle } = await noCgroups.provision(spec({ network: 'public' }));
    inspector.track(handle);
    const [pid = '', start = ''] = readFileSync(join(localHandle(handle).stateDir, NETWORK_PID_FILE), 'utf8').trim().split(' ');
    try {
      assert.equal(isSameProcess(Number(pid), start), true, 'its slirp4netns runs');
      assert.match(cmdline(Number(pid)), /slirp4netns .*--disable-host-loopback/);
      assert.equal((await noCgroups.exec(handle, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort")).stdout, 'lo\ntap0\n');
    } finally {
      await noCgroups.teardown(handle);
    }
    assert.equal(isSameProcess(Number(pid), start), false, 'teardown killed slirp4netns');
    assert.deepEqual(await inspector.leftovers(handle), { processes: [], mounts: [], directories: [], other: [] });
  });

  test('a public sandbox on a host without slirp4netns: infra/capability_missing naming it and the fix, and nothing of the sandbox is left', async () => {
    const before = new Set((await provider.list()).map((r) => r.id));
    process.env.ROLLOUT_SLIRP4NETNS = join(scratch, 'no-slirp4netns-here');
    try {
      await assert.rejects(
        provider.provision(spec({ network: 'public' })),
        (err: Error) => err.name === 'infra/capability_missing' && err.message.includes(`network "public" needs slirp4netns, not found at ${join(scratch, 'no-slirp4netns-here')}`) && /apt-get install slirp4netns/.test(err.message),
      );
    } finally {
      delete process.env.ROLLOUT_SLIRP4NETNS;
    }
    assert.deepEqual((await provider.list()).filter((r) => !before.has(r.id)), [], 'the half-made sandbox was torn down');
  });

  test('a host without bubblewrap gets an infra/capability_missing error that says what to install', async () => {
    const broken = new LocalSandboxProvider({ stateRoot, programs: { bwrap: join(scratch, 'no-bwrap-here') } });
    await assert.rejects(broken.provision(spec()), (err: Error) => {
      assert.equal(err.name, 'infra/capability_missing');
      assert.match(err.message, /apt-get install bubblewrap/);
      return true;
    });
  });

  test('a sandbox killed from outside is infra/sandbox_lost, and teardown still cleans up', async () => {
    const { handle } = await provider.provision(spec());
    inspector.track(handle);
    process.kill(localHandle(handle).pid, 'SIGKILL');
    await assert.rejects(provider.exec(handle, 'true'), (err: Error) => err.name === 'infra/sandbox_lost');
    await provider.teardown(handle);
    assert.deepEqual(await inspector.leftovers(handle), { processes: [], mounts: [], directories: [], other: [] });
  });

  for (const via of SPAWN_VIA) {
    test(`output written before a command exits is never lost, even when the worker is too busy to read it in time (spawned by the ${via})`, async () => {
      const busyProvider = new LocalSandboxProvider({ stateRoot, spawnVia: via });
      const { handle } = await busyProvider.provision(spec());
      // Block the event loop for 60 ms out of every 70 while commands run and exit.
      const busy = setInterval(() => {
        const until = Date.now() + 60;
        while (Date.now() < until);
      }, 10);
      try {
        await busyProvider.writeFile(handle, '/app/reward.txt', '1\n');
        const reads = await Promise.all(Array.from({ length: 40 }, () => busyProvider.readFile(handle, '/app/reward.txt')));
        const execs = await Promise.all(Array.from({ length: 20 }, (_, i) => busyProvider.exec(handle, `echo line-${i}`)));
        assert.deepEqual(reads.map((b) => Buffer.from(b).toString()), Array.from({ length: 40 }, () => '1\n'));
        assert.deepEqual(execs.map((r) => r.stdout), Array.from({ length: 20 }, (_, i) => `line-${i}\n`));
        const big = await busyProvider.exec(handle, 'head -c 300000 /dev/zero | tr "\\0" x', { maxOutputBytes: 1000 });
        assert.equal(big.stdoutTruncated, true);
        assert.match(big.stdout, /^x{1000}\n\[output truncated: 300000 bytes in total, the first 1000 kept\]$/);
      } finally {
        clearInterval(busy);
        await busyProvider.teardown(handle);
      }
    });
  }

  test('sandbox commands are forked by the spawn broker, a small process, not by the worker', async () => {
    const { handle } = await provider.provision(spec());
    inspector.track(handle);
    try {
      const running = provider.exec(handle, 'sleep 3; echo done');
      await eventually(async () => brokersOf(process.pid).length, (n) => n === 1, 'a spawn broker runs beside this process', 10_000);
      const [broker] = brokersOf(process.pid) as [number];
      const [command] = await eventually(async () => processesRunning('sleep 3; echo done'), (pids) => pids.length > 0, 'the command runs in the sandbox', 10_000);
      assert.ok(ancestorsOf(command as number).includes(broker), 'the command descends from the broker');
      assert.ok(!childrenOf(process.pid).some((c) => c !== broker && /nsenter|rollout-join-cgroup|unshare/.test(cmdline(c))), 'nothing was forked from this process, launchers included');
      assert.equal((await running).stdout, 'done\n');
    } finally {
      await provider.teardown(handle);
    }
    assert.deepEqual(await inspector.leftovers(handle), { processes: [], mounts: [], directories: [], other: [] });
  });

  test('through the broker too, a background process that writes to the exec’s pipes keeps running after the exec returned', async () => {
    // The conformance case covers the exec server; the broker is the way in for sandboxes without it.
    const provider = new LocalSandboxProvider({ stateRoot, execHelper: null, notice: () => undefined });
    const { handle } = await provider.provision(spec());
    inspector.track(handle);
    try {
      const r = await provider.exec(handle, `sh -c 'i=0; while :; do i=$((i+1)); echo tick-$i; echo tock >&2; echo $i > /tmp/count; sleep 0.3; done' & echo $! > /tmp/writer.pid`);
      assert.equal(r.exitCode, 0, r.stderr);
      const count = async (): Promise<number> => Number((await provider.exec(handle, 'kill -0 "$(cat /tmp/writer.pid)" && cat /tmp/count || echo -1')).stdout.trim());
      const first = await count();
      assert.ok(first >= 1, 'the writer is alive after its exec returned');
      await eventually(count, (n) => n >= first + 3, 'the writer keeps writing into the broker’s pipes');
    } finally {
      await provider.teardown(handle);
    }
    assert.deepEqual(await inspector.leftovers(handle), { processes: [], mounts: [], directories: [], other: [] });
  });

  test('a broker that dies mid-command fails that command as infra/exec_transport; the next command gets a new broker', async () => {
    // Commands go through the broker only in sandboxes without the exec server (no compiled helper at provision).
    const provider = new LocalSandboxProvider({ stateRoot, execHelper: null, notice: () => undefined });
    const { handle } = await provider.provision(spec());
    inspector.track(handle);
    try {
      await provider.exec(handle, 'true');
      const [broker] = brokersOf(process.pid) as [number];
      const running = provider.exec(handle, 'sleep 30');
      await eventually(async () => processesRunning('sleep 30'), (pids) => pids.length > 0, 'the command runs in the sandbox', 10_000);
      process.kill(broker, 'SIGKILL');
      await assert.rejects(running, (err: Error) => err.name === 'infra/exec_transport' && /spawn broker .* exited \(SIGKILL\)/.test(err.message));
      const again = await provider.exec(handle, 'echo ok; ps -eo args | grep -c "^sleep 30"');
      assert.equal(again.stdout, 'ok\n1\n', 'a new broker ran it; the lost command still runs in the sandbox until teardown');
      assert.notEqual(brokersOf(process.pid)[0], broker);
    } finally {
      await provider.teardown(handle);
    }
    assert.deepEqual(await inspector.leftovers(handle), { processes: [], mounts: [], directories: [], other: [] });
  });

  test('a bad spec names the field and the fix', async () => {
    await assert.rejects(provider.provision(spec({ environmentDir: join(scratch, 'missing-env') })), /environmentDir .*missing-env is not a directory/);
    await assert.rejects(provider.provision(spec({ limits: { memoryMb: -1 } })), (err: Error) => err.name === 'task/invalid_spec' && /limits\.memoryMb/.test(err.message));
  });

  test('the registry on disk lists a sandbox whose worker forgot it, and teardown by id removes it', async () => {
    const { handle } = await provider.provision(spec({ labels: { orphan: 'yes' } }));
    inspector.track(handle);
    const other = new LocalSandboxProvider({ stateRoot });
    const [record] = await other.list({ orphan: 'yes' });
    assert.equal(record?.id, handle.id);
    assert.equal(record?.alive, true);
    const report = await other.teardown(handle.id);
    assert.equal(report.existed, true);
    assert.ok(report.processesKilled >= 2, `killed ${report.processesKilled}`);
    assert.deepEqual(report.directoriesRemoved, [localHandle(handle).stateDir]);
    assert.deepEqual(await inspector.leftovers(handle), { processes: [], mounts: [], directories: [], other: [] });
  });
});
