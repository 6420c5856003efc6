/**
 * The conformance suite every sandbox provider must pass (DESIGN.md, "Sandbox
 * providers"): reset between attempts, isolation between sandboxes, escape
 * attempts contained, bounded output and time, idempotent teardown, and
 * nothing left on the host after 200 cycles.
 *
 * A provider's test file calls `sandboxConformanceSuite` with the provider and
 * an inspector that can see the provider's host-side traces.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { lookup } from 'node:dns/promises';
import net, { connect, createServer } from 'node:net';
import { networkInterfaces } from 'node:os';
import { describe, test as nodeTest, type TestContext } from 'node:test';
import type { SandboxHandle, SandboxProvider, SandboxSpec } from '../../shared/sandbox.js';
import { eventually } from '../helpers/eventually.js';

export interface Leftovers {
  processes: number[];
  mounts: string[];
  directories: string[];
  other: string[];
}

export interface ConformanceTarget {
  provider: SandboxProvider;
  /** A spec for a fresh sandbox from the suite's shared task environment (contains `start.txt` with "hello\n"). */
  spec(overrides?: Partial<SandboxSpec>): SandboxSpec;
  /** Remembers whatever host traces of `handle` the inspector needs, right after provision. */
  track(handle: SandboxHandle): void;
  /** Everything of the sandbox still on the host (after teardown this must be empty). */
  leftovers(handle: SandboxHandle): Promise<Leftovers>;
  /** Secrets planted on the host before the suite: files the sandbox must not read, env var values it must not see. */
  secrets: { files: string[]; envValue: string; hostPaths: string[] };
  /** A TCP port that listens on the host's loopback (the Temporal server's, for one). */
  hostPorts: number[];
}

const NONE: Leftovers = { processes: [], mounts: [], directories: [], other: [] };

/** Whether this process can open a TCP connection to host:port within 5 s. */
function reachableFromHost(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port, timeout: 5_000 });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.once('connect', () => done(true));
    socket.once('timeout', () => done(false));
    socket.once('error', () => done(false));
  });
}

/**
 * `notApplicable` maps the start of a case's title to why that case's
 * semantics do not apply to the provider under test (it is then reported as
 * skipped with that reason, so the gap stays visible).
 */
export function sandboxConformanceSuite(name: string, target: () => ConformanceTarget, options: { notApplicable?: Record<string, string>; skip?: string | false } = {}): void {
  const test = (title: string, fn: (t: TestContext) => Promise<void>): void => {
    const reason = Object.entries(options.notApplicable ?? {}).find(([prefix]) => title.startsWith(prefix))?.[1];
    nodeTest(title, reason ? { skip: `not applicable to ${name}: ${reason}` } : {}, fn);
  };
  describe(`${name} sandbox conformance`, { timeout: 600_000, skip: options.skip ?? false }, () => {
    async function fresh(overrides?: Partial<SandboxSpec>): Promise<SandboxHandle> {
      const t = target();
      const { handle } = await t.provider.provision(t.spec(overrides));
      t.track(handle);
      return handle;
    }

    async function tornDown(handle: SandboxHandle): Promise<void> {
      const t = target();
      await t.provider.teardown(handle);
      // A killed process can stay a zombie for a moment until the host's init reaps it (slow on a loaded
      // machine); a real leak is still there after the grace period.
      let left = await t.leftovers(handle);
      for (const deadline = Date.now() + 10_000; JSON.stringify(left) !== JSON.stringify(NONE) && Date.now() < deadline; left = await t.leftovers(handle)) {
        await new Promise((r) => setTimeout(r, 200));
      }
      assert.deepEqual(left, NONE, `nothing of ${handle.id} is left on the host 10 s after teardown`);
    }

    test('reset: a fresh sandbox sees neither the files nor the processes of an earlier one', async () => {
      const { provider } = target();
      const a = await fresh();
      const wrote = await provider.exec(a, 'echo from-a > /app/marker && (setsid sleep 4242 >/dev/null 2>&1 &) && cat /app/start.txt');
      assert.equal(wrote.exitCode, 0, wrote.stderr);
      assert.equal(wrote.stdout, 'hello\n', 'the task starting files are there');
      const ps = await provider.exec(a, 'ps -eo args');
      assert.match(ps.stdout, /sleep 4242/, "A's background process keeps running after its exec returned");

      const b = await fresh();
      try {
        const seen = await provider.exec(b, 'ls -A /app; ps -eo args');
        assert.doesNotMatch(seen.stdout, /marker/);
        assert.doesNotMatch(seen.stdout, /sleep 4242/);
        assert.match(seen.stdout, /start\.txt/);
      } finally {
        await tornDown(b);
      }
      await tornDown(a);
    });

    test('isolation: two live sandboxes cannot see each other’s files or processes', async () => {
      const { provider } = target();
      const [a, b] = await Promise.all([fresh(), fresh()]);
      try {
        // $! is the background process from its fork on; it becomes `sleep 4343` only once it has run setsid's and
        // sleep's exec, which may come after this exec returned (docs/sandbox.md, "Background processes").
        const started = await provider.exec(a, 'echo secret-of-a > /app/a.txt; echo tmp-of-a > /tmp/a.tmp; (setsid sleep 4343 >/dev/null 2>&1 & echo $! > /tmp/bg.pid)');
        assert.equal(started.exitCode, 0, started.stderr);
        const listing = await provider.exec(b, 'ls -A /app /tmp');
        assert.doesNotMatch(listing.stdout, /a\.txt|a\.tmp/);
        const processes = await provider.exec(b, "pgrep -fx 'sleep 4343' || echo none");
        assert.equal(processes.stdout, 'none\n', 'B cannot see A’s processes');
        const read = await provider.exec(b, 'cat /app/a.txt /tmp/a.tmp');
        assert.notEqual(read.exitCode, 0, 'reading A’s files from B fails');
        assert.doesNotMatch(read.stdout, /secret-of-a|tmp-of-a/);
        const stillInA = await provider.exec(a, 'cat /app/a.txt; kill -0 "$(cat /tmp/bg.pid)" && echo alive; ps -eo pid,pgid,sid,stat,args >&2');
        assert.equal(stillInA.stdout, 'secret-of-a\nalive\n', `A still has its file and its background process:\n${stillInA.stderr}`);
        await eventually(async () => (await provider.exec(a, 'tr "\\0" " " < "/proc/$(cat /tmp/bg.pid)/cmdline"')).stdout.trim(), (args) => args === 'sleep 4343', 'the background process becomes `sleep 4343` under the same pid');
      } finally {
        await Promise.all([tornDown(a), tornDown(b)]);
      }
    });

    test('background processes: started with &, nohup, disown, a subshell or setsid, each keeps running and writing after its exec returned', async () => {
      const { provider } = target();
      const h = await fresh();
      // A writer that ticks on the stdout and stderr it inherited (the exec's pipes) and counts in a file.
      const writer = (name: string): string => `sh -c 'i=0; while :; do i=$((i+1)); echo tick-$i; echo tock-$i >&2; echo $i > /tmp/${name}.count; sleep 0.3; done'`;
      const forms: Record<string, string> = {
        amp: `${writer('amp')} & echo $! > /tmp/amp.pid`,
        nohup: `nohup ${writer('nohup')} & echo $! > /tmp/nohup.pid`,
        disown: `${writer('disown')} & echo $! > /tmp/disown.pid; disown`,
        subshell: `(${writer('subshell')} & echo $! > /tmp/subshell.pid)`,
        setsid: `setsid ${writer('setsid')} & echo $! > /tmp/setsid.pid`,
      };
      try {
        for (const [name, command] of Object.entries(forms)) {
          const r = await provider.exec(h, command);
          assert.equal(r.exitCode, 0, `${name}: ${r.stderr}`);
          assert.equal(r.timedOut, false, `${name}: the exec returns although its background process holds its output`);
        }
        const counts = async (): Promise<Record<string, number>> => {
          const r = await provider.exec(h, `for f in ${Object.keys(forms).join(' ')}; do kill -0 "$(cat /tmp/$f.pid)" 2>/dev/null && echo "$f $(cat /tmp/$f.count)" || echo "$f dead"; done`);
          const entries = r.stdout.trim().split('\n').map((line): [string, number] => {
            const [name = line, count = 'dead'] = line.split(' ');
            return [name, count === 'dead' ? -1 : Number(count)];
          });
          return Object.fromEntries(entries);
        };
        const first = await counts();
        for (const name of Object.keys(forms)) assert.ok((first[name] ?? -1) >= 1, `${name}: alive after its exec returned (${JSON.stringify(first)})`);
        // Three more ticks each, all written after every exec above returned: none died of a closed pipe.
        await eventually(counts, (now) => Object.keys(forms).every((name) => (now[name] ?? -1) >= (first[name] ?? 0) + 3), 'every background writer keeps writing');

        const timedOut = await provider.exec(h, `${writer('grouped')} & echo $! > /tmp/grouped.pid; setsid ${writer('survivor')} & echo $! > /tmp/survivor.pid; sleep 1000`, { timeoutMs: 1_500 });
        assert.equal(timedOut.timedOut, true);
        const after = await eventually(
          async () => (await provider.exec(h, 'kill -0 "$(cat /tmp/grouped.pid)" 2>/dev/null && echo grouped-alive; kill -0 "$(cat /tmp/survivor.pid)" && echo survivor-alive')).stdout,
          (out) => !out.includes('grouped-alive'),
          'the timed-out command’s group is gone',
        );
        assert.equal(after, 'survivor-alive\n', 'a process that left the group with setsid outlives the timed-out command');
      } finally {
        await tornDown(h);
      }
    });

    test('escape: host secret files, the worker’s environment and host paths are invisible', async () => {
      const { provider, secrets } = target();
      const h = await fresh();
      try {
        for (const file of secrets.files) {
          const r = await provider.exec(h, `cat ${JSON.stringify(file)}`);
          assert.notEqual(r.exitCode, 0, `${file} is not readable`);
        }
        for (const path of secrets.hostPaths) {
          const r = await provider.exec(h, `test -e ${JSON.stringify(path)}`);
          assert.equal(r.exitCode, 1, `${path} does not exist inside`);
        }
        const env = await provider.exec(h, 'env; cat /proc/*/environ 2>/dev/null | tr "\\0" "\\n"');
        assert.ok(!env.stdout.includes(secrets.envValue), 'the worker’s environment does not leak into any sandbox process');
        // An image has an /etc/shadow of its own (its users, no host secret); the host's must never show.
        const shadow = await provider.exec(h, 'cat /etc/shadow');
        assert.ok(shadow.exitCode !== 0 || shadow.stdout !== readFileSync('/etc/shadow', 'utf8'), 'the host’s /etc/shadow is not there');
      } finally {
        await tornDown(h);
      }
    });

    test('escape: no network beyond the sandbox’s own loopback; host ports unreachable', async () => {
      const { provider, hostPorts } = target();
      const h = await fresh();
      try {
        const dev = await provider.exec(h, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
        assert.deepEqual(dev.stdout.trim().split('\n'), ['lo'], 'the only interface is loopback');
        const routes = await provider.exec(h, 'tail -n +2 /proc/net/route');
        assert.equal(routes.stdout.trim(), '', 'there is no route anywhere');
        // Only with no route at all (checked above) is an outside address tried: nothing can leave.
        const outside = await provider.exec(h, 'exec 3<>/dev/tcp/192.0.2.1/80', { timeoutMs: 5_000 });
        assert.notEqual(outside.exitCode, 0);
        assert.match(outside.stderr, /Network is unreachable/);
        // What a public sandbox reaches (the case below), this one does not: the registry by its address, by name.
        const registry = process.env.ROLLOUT_TEST_PUBLIC_HOST ?? 'pypi.org';
        const address = await lookup(registry).then((a) => a.address, () => undefined);
        if (address && net.isIPv4(address)) {
          const r = await provider.exec(h, `exec 3<>/dev/tcp/${address}/443`, { timeoutMs: 5_000 });
          assert.match(r.stderr, /Network is unreachable/, `${registry} (${address}) is unreachable without a network`);
        }
        const byName = await provider.exec(h, `exec 3<>/dev/tcp/${registry}/443`, { timeoutMs: 10_000 });
        assert.notEqual(byName.exitCode, 0, `${registry} by name is unreachable without a network`);
        for (const port of hostPorts) {
          const r = await provider.exec(h, `exec 3<>/dev/tcp/127.0.0.1/${port}`, { timeoutMs: 5_000 });
          assert.notEqual(r.exitCode, 0, `host port ${port} is unreachable`);
          assert.match(r.stderr, /Connection refused/);
        }
      } finally {
        await tornDown(h);
      }
    });

    test('network public: the outside (a package registry, by name) is reachable; the host’s ports, its own addresses and the metadata address are not', async (t) => {
      const { provider, hostPorts } = target();
      const registry = process.env.ROLLOUT_TEST_PUBLIC_HOST ?? 'pypi.org';
      if (!(await reachableFromHost(registry, 443))) {
        t.skip(`this host cannot reach ${registry}:443 (set ROLLOUT_TEST_PUBLIC_HOST to a registry host it reaches)`);
        return;
      }
      // A service on every address of the host, reachable from the host itself: the sandbox's failure is the sandbox's.
      const service = createServer((s) => {
        s.on('error', () => undefined); // a probe closes at once
        s.end('host service\n');
      });
      await new Promise<void>((r) => service.listen(0, '0.0.0.0', r));
      t.after(() => new Promise((r) => service.close(r)));
      const address = service.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      const own = Object.values(networkInterfaces()).flatMap((list) => (list ?? []).filter((a) => a.family === 'IPv4' && !a.internal).map((a) => a.address));
      for (const a of own) assert.ok(await reachableFromHost(a, port), `the host reaches its own ${a}:${port}`);
      const h = await fresh({ network: 'public' });
      try {
        const dev = await provider.exec(h, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort");
        assert.deepEqual(dev.stdout.trim().split('\n'), ['lo', 'tap0'], 'loopback and the user-mode network’s interface');
        const get = await provider.exec(
          h,
          `url=https://${registry}/; if command -v curl >/dev/null; then curl -sS -o /dev/null -w '%{http_code}' "$url"; ` +
            `elif command -v python3 >/dev/null; then python3 -c 'import sys,urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=20).status, end="")' "$url"; ` +
            `else exec 3<>/dev/tcp/${registry}/443 && printf 200; fi`,
          { timeoutMs: 60_000 },
        );
        assert.equal(get.exitCode, 0, `an HTTPS GET of https://${registry}/ from the sandbox: ${get.stderr}`);
        assert.match(get.stdout, /^[23]\d\d$/, `HTTP status of https://${registry}/`);
        const probe = (host: string, p: number): Promise<{ exitCode: number; stderr: string }> =>
          provider.exec(h, `timeout 5 bash -c 'exec 3<>/dev/tcp/${host}/${p}'`, { timeoutMs: 10_000 });
        // slirp's gateway stands for the host: its loopback must not be behind it, nor behind the sandbox's own.
        for (const p of hostPorts) {
          for (const host of ['10.0.2.2', '127.0.0.1']) assert.notEqual((await probe(host, p)).exitCode, 0, `host loopback port ${p} via ${host} is unreachable`);
        }
        // Cloud host endpoints (AWS/GCP metadata, Azure's WireServer) and slirp's own network beyond its
        // gateway and DNS forwarder (libslirp sends 10.0.2.x out to the host's network): stopped by a route,
        // before any packet leaves the sandbox.
        for (const a of [...own, '169.254.169.254', '168.63.129.16', '10.0.2.50', '10.0.2.4']) {
          const r = await probe(a, own.includes(a) ? port : 80);
          assert.notEqual(r.exitCode, 0, `${a} is unreachable from a public sandbox`);
          assert.match(r.stderr, /No route to host|Network is unreachable/, `${a}: stopped by the sandbox's routes, not by chance`);
        }
      } finally {
        await tornDown(h);
      }
    });

    test('escape: writes outside the workspace fail and never reach the host', async () => {
      const { provider } = target();
      const h = await fresh();
      try {
        for (const path of ['/usr/local/bin/rollout-escape', '/usr/bin/rollout-escape', '/etc/rollout-escape', '/rollout-escape']) {
          const r = await provider.exec(h, `echo pwned > ${path}`);
          assert.notEqual(r.exitCode, 0, `writing ${path} fails`);
          assert.match(r.stderr, /Read-only file system|Permission denied/);
        }
        const ok = await provider.exec(h, 'echo fine > /app/inside && echo fine > /tmp/inside && echo fine > /logs/agent/log && cat /app/inside');
        assert.equal(ok.stdout, 'fine\n', 'the workspace, /tmp and /logs are writable');
      } finally {
        await tornDown(h);
      }
    });

    test('escape: host-wide sysctls under /proc/sys are read-only', async () => {
      const { provider } = target();
      const h = await fresh();
      try {
        // Written back unchanged: were it writable, this sysctl would name a program the host kernel runs as root.
        const sysctl = await provider.exec(h, 'v=$(cat /proc/sys/kernel/core_pattern) && printf "%s\\n" "$v" > /proc/sys/kernel/core_pattern');
        assert.notEqual(sysctl.exitCode, 0, 'host-wide sysctls under /proc/sys are read-only');
        assert.match(sysctl.stderr, /Read-only file system|Permission denied/);
      } finally {
        await tornDown(h);
      }
    });

    test('escape: startup files the agent writes (~/.bashrc, ~/.profile) never run before a later exec', async () => {
      const { provider } = target();
      const h = await fresh();
      try {
        const plant = await provider.exec(h, 'for f in /root/.bashrc /root/.bash_profile /root/.profile; do echo "echo planted-$f; exit 3" > $f; done');
        assert.equal(plant.exitCode, 0, plant.stderr);
        const r = await provider.exec(h, 'echo clean; bash -c "echo nested"');
        assert.deepEqual([r.exitCode, r.stdout], [0, 'clean\nnested\n'], 'neither the exec nor a bash it starts sources them');
      } finally {
        await tornDown(h);
      }
    });

    test('escape: a fork bomb hits the pids limit and is cleaned up', async () => {
      const { provider } = target();
      const h = await fresh({ limits: { pids: 64 } });
      try {
        const bomb = await provider.exec(h, 'bomb() { bomb | bomb & }; bomb; sleep 2', { timeoutMs: 4_000, maxOutputBytes: 8_192 });
        assert.match(bomb.stderr, /Resource temporarily unavailable|retry: No child processes|fork/);
        const count = await provider.exec(h, 'ps -e --no-headers | wc -l', { timeoutMs: 10_000 });
        if (count.exitCode === 0) assert.ok(Number(count.stdout.trim()) <= 64, `at most 64 processes alive, saw ${count.stdout.trim()}`);
      } finally {
        await tornDown(h);
      }
    });

    test('escape: a memory hog is stopped at the memory limit', async () => {
      const { provider } = target();
      const h = await fresh({ limits: { memoryMb: 64 } });
      try {
        const hog = await provider.exec(h, "python3 -c \"b = bytearray(512 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]); print('allocated')\"", { timeoutMs: 30_000 });
        assert.notEqual(hog.exitCode, 0, 'the hog does not complete');
        assert.doesNotMatch(hog.stdout, /allocated/);
        const after = await provider.exec(h, 'echo still-here');
        assert.equal(after.stdout, 'still-here\n', 'the sandbox survives its hog');
      } finally {
        await tornDown(h);
      }
    });

    test('escape: a process that ignores SIGTERM and detaches still dies at teardown', async () => {
      const { provider } = target();
      const h = await fresh();
      const r = await provider.exec(h, 'setsid nohup bash -c \'trap "" TERM HUP INT; while :; do sleep 1; done\' >/dev/null 2>&1 & echo started');
      assert.equal(r.stdout, 'started\n');
      await tornDown(h);
    });

    test('an exec that never returns times out, and its processes are killed', async () => {
      const { provider } = target();
      const h = await fresh();
      try {
        const r = await provider.exec(h, 'trap "" TERM; sleep 1000', { timeoutMs: 1_000 });
        assert.equal(r.timedOut, true);
        assert.notEqual(r.exitCode, 0);
        const ps = await provider.exec(h, 'ps -eo args');
        assert.doesNotMatch(ps.stdout, /sleep 1000/);
      } finally {
        await tornDown(h);
      }
    });

    test('huge output is truncated, says so, and does not exhaust memory', async () => {
      const { provider } = target();
      const h = await fresh();
      try {
        const big = await provider.exec(h, "head -c 50000000 /dev/zero | tr '\\0' a", { maxOutputBytes: 65_536 });
        assert.equal(big.exitCode, 0);
        assert.equal(big.stdoutTruncated, true);
        assert.ok(big.stdout.startsWith('a'.repeat(65_536)));
        assert.match(big.stdout, /\[output truncated: 50000000 bytes in total, the first 65536 kept\]$/);
        const endless = await provider.exec(h, 'yes', { maxOutputBytes: 4_096, timeoutMs: 1_000 });
        assert.equal(endless.timedOut, true);
        assert.equal(endless.stdoutTruncated, true);
        const bytes = await provider.exec(h, "printf 'ok\\377\\376\\n'"); // octal escapes: POSIX sh, not only bash
        assert.equal(bytes.stdout, 'ok\uFFFD\uFFFD\n', 'non-UTF-8 bytes arrive as replacement characters');
      } finally {
        await tornDown(h);
      }
    });

    test('exec options: stdin, env, cwd, exit codes', async () => {
      const { provider } = target();
      const h = await fresh();
      try {
        const r = await provider.exec(h, 'mkdir -p /app/sub && cd /app/sub && pwd && cat && echo "$GREETING"; exit 7', {
          stdin: 'from-stdin\n',
          env: { GREETING: 'hi there' },
        });
        assert.deepEqual([r.exitCode, r.stdout], [7, '/app/sub\nfrom-stdin\nhi there\n']);
        const cwd = await provider.exec(h, 'pwd', { cwd: '/tmp' });
        assert.equal(cwd.stdout, '/tmp\n');
      } finally {
        await tornDown(h);
      }
    });

    test('writeFile and readFile round-trip bytes and enforce size limits', async () => {
      const { provider } = target();
      const h = await fresh();
      try {
        const bytes = new Uint8Array([0, 1, 2, 255, 10, 13]);
        await provider.writeFile(h, '/app/deep/dir/blob.bin', bytes);
        assert.deepEqual(await provider.readFile(h, '/app/deep/dir/blob.bin'), bytes);
        await provider.writeFile(h, '/logs/verifier/reward.txt', '1\n');
        assert.equal(Buffer.from(await provider.readFile(h, '/logs/verifier/reward.txt')).toString(), '1\n');
        await provider.exec(h, 'head -c 5000 /dev/zero > /app/large');
        await assert.rejects(provider.readFile(h, '/app/large', { maxBytes: 1000 }), /more than 1000 bytes/);
        await assert.rejects(provider.readFile(h, '/app/missing'), /No such file/);
      } finally {
        await tornDown(h);
      }
    });

    test('the writable layer is bounded by the disk limit', async () => {
      const { provider } = target();
      const h = await fresh({ limits: { diskMb: 16 } });
      try {
        const fill = await provider.exec(h, 'head -c 32000000 /dev/zero > /app/big');
        assert.notEqual(fill.exitCode, 0);
        assert.match(fill.stderr, /No space left on device/);
        const after = await provider.exec(h, 'rm /app/big && echo recovered');
        assert.equal(after.stdout, 'recovered\n');
      } finally {
        await tornDown(h);
      }
    });

    test('teardown is idempotent and safe to run concurrently', async () => {
      const { provider } = target();
      const h = await fresh();
      await provider.exec(h, '(setsid sleep 999 >/dev/null 2>&1 &)');
      const reports = await Promise.all([provider.teardown(h), provider.teardown(h), provider.teardown(h.id)]);
      assert.ok(reports.some((r) => r.existed));
      const again = await provider.teardown(h);
      assert.equal(again.existed, false);
      assert.equal((await provider.teardown('sbx-never-existed')).existed, false);
      assert.deepEqual(await target().leftovers(h), NONE);
    });

    test('an exec on a torn-down sandbox is an infra/sandbox_lost failure', async () => {
      const { provider } = target();
      const h = await fresh();
      await tornDown(h);
      await assert.rejects(provider.exec(h, 'true'), (err: Error) => err.name === 'infra/sandbox_lost');
    });

    test('list finds sandboxes by label with their owner and lease', async () => {
      const { provider } = target();
      const label = `conformance-${Date.now()}`;
      const h = await fresh({ labels: { suite: label }, owner: { workflowId: 'wf-list', runId: 'run-1', attempt: 2 } });
      try {
        const found = await provider.list({ suite: label });
        assert.equal(found.length, 1);
        assert.equal(found[0]?.id, h.id);
        assert.deepEqual(found[0]?.owner, { workflowId: 'wf-list', runId: 'run-1', attempt: 2 });
        assert.equal(found[0]?.alive, true);
        assert.ok(Date.parse(found[0]?.leaseExpiresAt ?? '') > Date.now());
      } finally {
        await tornDown(h);
      }
      assert.deepEqual(await provider.list({ suite: label }), []);
    });

    test('200 provision/teardown cycles leave nothing behind', async () => {
      const { provider } = target();
      const handles: SandboxHandle[] = [];
      for (let i = 0; i < 200; i++) {
        const h = await fresh();
        handles.push(h);
        if (i % 10 === 0) {
          const r = await provider.exec(h, `echo cycle-${i} > /app/cycle && cat /app/cycle`);
          assert.equal(r.stdout, `cycle-${i}\n`);
        }
        await provider.teardown(h);
      }
      for (const h of handles) assert.deepEqual(await target().leftovers(h), NONE, `cycle sandbox ${h.id}`);
    });
  });
}
