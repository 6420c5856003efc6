/**
 * The compiled sandbox helper (activities/sandbox/local/execHelper/) against
 * the program chain it replaces: a command entered either way, in a sandbox
 * launched either way, sees the same credentials (uid, gid, groups, every
 * capability set, no_new_privs, seccomp), the same namespaces, cgroup, root,
 * working directory, rlimits and environment. Needs ROLLOUT_EXEC_HELPER
 * (bash scripts/ensure-exec-helper.sh); skips with that message without it.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { LocalSandboxProvider } from '../../activities/sandbox/local/localSandboxProvider.js';
import { localHandle, type SandboxSpec } from '../../shared/sandbox.js';
import { LocalSandboxInspector } from '../helpers/localSandboxInspector.js';

const helper = process.env.ROLLOUT_EXEC_HELPER;
const skip = helper ? false : 'ROLLOUT_EXEC_HELPER is not set: build the helper with `bash scripts/ensure-exec-helper.sh` and export its path';

const scratch = mkdtempSync(join(tmpdir(), 'exec-helper-test-'));
const stateRoot = join(scratch, 'state');
const environmentDir = join(scratch, 'environment');
mkdirSync(environmentDir);
writeFileSync(join(environmentDir, 'start.txt'), 'hello\n');
const inspector = new LocalSandboxInspector();
after(() => rmSync(scratch, { recursive: true, force: true }));

/** What a command can tell about how it was started, but its own pids (which differ by one fork). */
const PROBE = [
  "grep -E '^(Uid|Gid|Groups|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp)' /proc/self/status",
  "grep -E 'address space|processes|open files' /proc/self/limits",
  'for n in ipc mnt net pid uts cgroup user; do echo "$n $(readlink /proc/self/ns/$n)"; done',
  'cat /proc/self/cgroup',
  'pwd; readlink /proc/self/root; umask',
  'env | sort',
  'echo "pgrp leader outside: $(ps -o pgid= -p $$ | tr -d " ")"',
].join('; ');

const owner = { workflowId: 'exec-helper', runId: 'run', attempt: 0 };

describe('sandbox helper', { skip }, () => {
  const cases: { name: string; cgroupRoot?: string; spec: Partial<SandboxSpec> }[] = [
    { name: 'plain host-base sandbox', spec: {} },
    { name: 'limits and kept file capabilities', spec: { limits: { memoryMb: 256, pids: 64, cpus: 1 }, fileCapabilities: ['chown', 'dac_override', 'fowner', 'fsetid'], env: { IMAGE_VAR: 'from-spec' } } },
    { name: 'no writable cgroups (memory as RLIMIT_AS)', cgroupRoot: join(scratch, 'no-cgroups'), spec: { limits: { memoryMb: 300 } } },
    { name: 'host network', spec: { network: 'host', workdir: '/work/dir' } },
  ];
  for (const c of cases) {
    test(`${c.name}: entering through the helper is the same as through sh + nsenter + setpriv + prlimit, however the sandbox was launched`, async () => {
      const common = { stateRoot, ...(c.cgroupRoot ? { cgroupRoot: c.cgroupRoot } : {}) };
      const viaHelper = new LocalSandboxProvider({ ...common, execHelper: helper as string });
      const viaChain = new LocalSandboxProvider({ ...common, execHelper: null, notice: () => undefined });
      assert.equal(viaHelper.execHelper, helper);
      assert.equal(viaChain.execHelper, null);
      for (const launcher of [viaHelper, viaChain]) {
        const { handle } = await launcher.provision({ environmentDir, owner, ...c.spec });
        inspector.track(handle);
        try {
          const a = await viaHelper.exec(handle, PROBE, { env: { EXEC_VAR: 'x' } });
          const b = await viaChain.exec(handle, PROBE, { env: { EXEC_VAR: 'x' } });
          assert.equal(a.exitCode, 0, a.stderr);
          assert.equal(b.exitCode, 0, b.stderr);
          assert.equal(a.stdout, b.stdout);
          assert.match(a.stdout, /^NoNewPrivs:\t1$/m);
          assert.match(a.stdout, /^CapAmb:\t0000000000000000$/m);
          assert.match(a.stdout, /^CapInh:\t0000000000000000$/m);
          // The command is its own process group's leader's child, in the sandbox's pid namespace (pgid 0 there: the leader is outside).
          assert.match(a.stdout, /^pgrp leader outside: 0$/m);
          if (c.spec.fileCapabilities) assert.match(a.stdout, /^CapBnd:\t000000000000001b$/m);
          else assert.match(a.stdout, /^CapBnd:\t0000000000000000$/m);
          const pid1 = await viaHelper.exec(handle, 'cat /proc/1/cmdline | tr "\\0" " "');
          assert.match(pid1.stdout, /bash --norc --noprofile -c/);
          // Exit statuses, signals and timeouts come through the helper's fork as they did through nsenter's.
          assert.equal((await viaHelper.exec(handle, 'exit 7')).exitCode, 7);
          assert.equal((await viaHelper.exec(handle, 'kill -9 $$')).exitCode, 137);
          const slow = await viaHelper.exec(handle, 'sleep 30', { timeoutMs: 200 });
          assert.equal(slow.timedOut, true);
          await viaHelper.writeFile(handle, 'sub/file.txt', 'written');
          assert.equal(Buffer.from(await viaChain.readFile(handle, 'sub/file.txt')).toString(), 'written');
        } finally {
          await viaHelper.teardown(handle);
        }
        assert.deepEqual(await inspector.leftovers(handle), { processes: [], mounts: [], directories: [], other: [] });
      }
    });
  }

  test('the helper refuses a pid whose start time is not the sandbox init\'s (a recycled pid), and names what it could not do', async () => {
    const provider = new LocalSandboxProvider({ stateRoot, execHelper: helper as string });
    const { handle } = await provider.provision({ environmentDir, owner });
    try {
      const h = localHandle(handle);
      const wrong = spawnSync(helper as string, ['exec', String(h.pid), '1', h.cgroupProcFiles.join(',') || '-', '0', '-', '--', '/bin/true'], { encoding: 'utf8' });
      assert.equal(wrong.status, 1);
      assert.match(wrong.stderr, /the sandbox's init is gone: pid \d+/);
      const right = spawnSync(helper as string, ['exec', String(h.pid), h.pidStartTime, h.cgroupProcFiles.join(',') || '-', '0', '-', '--', '/bin/cat', '/proc/self/status'], { encoding: 'utf8' });
      assert.equal(right.status, 0, right.stderr);
      assert.match(right.stdout, /^CapEff:\t0000000000000000$/m);
      const usage = spawnSync(helper as string, ['exec', '1'], { encoding: 'utf8' });
      assert.equal(usage.status, 2);
      assert.match(usage.stderr, /usage: rollout-sandbox-helper exec PID/);
    } finally {
      await provider.teardown(handle);
    }
  });
});

test('without the helper the provider says once why it uses the program chain, and still works', async () => {
  const notices: string[] = [];
  const missing = join(scratch, 'no-helper-here');
  const first = new LocalSandboxProvider({ stateRoot, execHelper: missing, notice: (m) => notices.push(m) });
  new LocalSandboxProvider({ stateRoot, execHelper: missing, notice: (m) => notices.push(m) });
  assert.equal(first.execHelper, null);
  assert.equal(notices.length, 1);
  assert.match(notices[0] as string, /ROLLOUT_EXEC_HELPER=.*no-helper-here is not an executable file; rebuild it with bash scripts\/ensure-exec-helper\.sh/);
  const { handle } = await first.provision({ environmentDir, owner });
  try {
    const r = await first.exec(handle, 'cat start.txt');
    assert.equal(r.stdout, 'hello\n');
  } finally {
    await first.teardown(handle);
  }
});
