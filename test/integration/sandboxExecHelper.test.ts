/**
 * The compiled sandbox helper (sandboxes/local/helper/) against
 * the program chain it replaces: a command run by the sandbox's exec server
 * (sandbox-init.c, the init of a sandbox the helper launched), entered through the
 * helper, or entered through the chain, in a sandbox launched either way, sees
 * the same credentials (uid, gid, groups, the permitted, effective and bounding
 * capability sets, no_new_privs, seccomp), the same namespaces, cgroup, root,
 * working directory, rlimits and environment. What differs is named: the exec
 * server's commands keep their capabilities through the ambient set (bwrap sets
 * SECBIT_NOROOT) and lead their own process group inside the sandbox. Needs ROLLOUT_EXEC_HELPER
 * (bash scripts/ensure-exec-helper.sh); skips with that message without it.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { LocalSandboxProvider } from '../../sandboxes/local/localSandboxProvider.js';
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
  'echo "pgid: $(ps -o pgid= -p $$ | tr -d " ") self: $$"',
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
          const h = localHandle(handle);
          assert.equal(h.execSocket !== undefined, launcher === viaHelper, 'a sandbox the helper launched has an exec server');
          const { execSocket, ...entered } = h;
          const probe = async (provider: LocalSandboxProvider, target: typeof h): Promise<string> => {
            const r = await provider.exec(target, PROBE, { env: { EXEC_VAR: 'x' } });
            assert.equal(r.exitCode, 0, r.stderr);
            return r.stdout;
          };
          const viaHelperExec = await probe(viaHelper, entered);
          const viaChainExec = await probe(viaChain, entered);
          const ownPid = (out: string): string => out.replace(/ self: \d+$/m, '');
          assert.equal(ownPid(viaHelperExec), ownPid(viaChainExec));
          const keptMask = c.spec.fileCapabilities ? '000000000000001b' : '0000000000000000';
          for (const out of [viaHelperExec]) {
            assert.match(out, /^NoNewPrivs:\t1$/m);
            assert.match(out, /^CapAmb:\t0000000000000000$/m);
            assert.match(out, /^CapInh:\t0000000000000000$/m);
            assert.match(out, new RegExp(`^CapBnd:\\t${keptMask}$`, 'm'));
            // The command is its own process group's leader's child, in the sandbox's pid namespace (pgid 0 there: the leader is outside).
            assert.match(out, /^pgid: 0 self: \d+$/m);
          }
          if (execSocket !== undefined) {
            const served = await probe(viaHelper, h);
            const cgroupLines = /^(cgroup cgroup:.*|\d+:[^:\n]*:.*)$/gm;
            const same = (out: string): string => out.replace(/^(CapInh|CapAmb):.*$/gm, '').replace(/^pgid: .*$/m, '').replace(cgroupLines, '');
            assert.equal(same(served), same(viaHelperExec), 'the exec server runs commands as the helper enters them');
            // Its commands are the init's children, so they stay in the sandbox's cgroup namespace (bwrap
            // --unshare-cgroup-try), rooted at the sandbox's cgroups: no host cgroup path shows, as it does
            // through setns, which does not enter that namespace.
            for (const line of served.match(/^\d+:[^:\n]*:.*$/gm) ?? []) assert.match(line, /:\/$/, `a cgroup path inside the sandbox: ${line}`);
            if (h.cgroupProcFiles.length > 0) assert.match(viaHelperExec, /:\/rollout-pipeline\/sbx-/);
            // Kept capabilities survive execve through the ambient set (bwrap's SECBIT_NOROOT), and nothing more.
            assert.match(served, new RegExp(`^CapInh:\\t${keptMask}$`, 'm'));
            assert.match(served, new RegExp(`^CapAmb:\\t${keptMask}$`, 'm'));
            const [, pgid, self] = /^pgid: (\d+) self: (\d+)$/m.exec(served) ?? [];
            assert.equal(pgid, self, 'the command leads its own process group inside the sandbox');
          }
          const pid1 = await viaHelper.exec(handle, 'cat /proc/1/cmdline | tr "\\0" " "');
          assert.match(pid1.stdout, execSocket !== undefined ? /^\/proc\/self\/fd\/6 init 5 6 / : /bash --norc --noprofile -c/);
          // Exit statuses, signals and timeouts come through every way as they did through nsenter's.
          for (const target of execSocket !== undefined ? [h, entered] : [entered]) {
            assert.equal((await viaHelper.exec(target, 'exit 7')).exitCode, 7);
            assert.equal((await viaHelper.exec(target, 'kill -9 $$')).exitCode, 137);
            const slow = await viaHelper.exec(target, 'sleep 30', { timeoutMs: 200 });
            assert.equal(slow.timedOut, true);
          }
          await viaHelper.writeFile(handle, 'sub/file.txt', 'written');
          assert.equal(Buffer.from(await viaChain.readFile(entered, 'sub/file.txt')).toString(), 'written');
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

test('a sandbox whose exec socket path would not fit a unix socket gets the bash keeper and helper execs', { skip }, async () => {
  const longRoot = join(scratch, 'a-state-root-whose-path-is-too-long-for-a-unix-socket-'.padEnd(90, 'x'));
  const cases: { why: string; stateRoot: string; spec: Partial<SandboxSpec> }[] = [{ why: 'a long state root', stateRoot: longRoot, spec: { fileCapabilities: ['chown'] } }];
  for (const c of cases) {
    const provider = new LocalSandboxProvider({ stateRoot: c.stateRoot, execHelper: helper as string });
    const { handle } = await provider.provision({ environmentDir, owner, ...c.spec });
    inspector.track(handle);
    try {
      assert.equal(localHandle(handle).execSocket, undefined, `${c.why}: no exec server`);
      const r = await provider.exec(handle, 'cat /proc/1/cmdline | tr "\\0" " "; cat start.txt');
      assert.match(r.stdout, /^\S*\/bash --norc --noprofile -c .*hello\n$/s, `${c.why}: the keeper is pid 1 and commands still run`);
    } finally {
      await provider.teardown(handle);
    }
    assert.deepEqual(await inspector.leftovers(handle), { processes: [], mounts: [], directories: [], other: [] });
  }
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
