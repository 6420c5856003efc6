/**
 * The verifier on real sandboxes: every sample task tells good from bad, the
 * CLI fails loudly on a task that cannot, crashes and timeouts are infra, and
 * an agent's tampering never earns reward 1.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LocalSandboxProvider } from '../../sandboxes/local/localSandboxProvider.js';
import { checkTask } from '../../client/taskTools/checkTask.js';
import { loadTask } from '../../tasks/loadTask.js';
import { sandboxSpecForTask } from '../../images/sandboxSpecForTask.js';
import { shellQuote, uploadDirectory } from '../../sandboxes/uploadDirectory.js';
import { verifyCleanRoom, verifyInPlace, type VerifyOutcome } from '../../verifier/runVerifier.js';
import type { LoadedTask } from '../../shared/task.js';
import { eventually } from '../helpers/eventually.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const examples = join(root, 'examples/tasks');
const scratch = mkdtempSync(join(tmpdir(), 'verifier-test-'));
const provider = new LocalSandboxProvider({ stateRoot: join(scratch, 'state') });
const owner = { workflowId: 'verifier-test', runId: 'r', attempt: 0 };

after(async () => {
  assert.deepEqual(await provider.list(), [], 'every sandbox of these tests was torn down');
  rmSync(scratch, { recursive: true, force: true });
});

function taskVariant(name: string, as: string, edit: (dir: string) => void): LoadedTask {
  const dir = join(scratch, as);
  cpSync(join(examples, name), dir, { recursive: true });
  edit(dir);
  return loadTask(dir);
}

/** Runs `agentCommand` as the agent would, then verifies the way `mode` says. */
async function attempt(task: LoadedTask, agentCommand: string, mode: 'in-place' | 'clean-room'): Promise<VerifyOutcome> {
  const spec = sandboxSpecForTask(task, owner);
  const { handle } = await provider.provision(spec);
  try {
    const r = await provider.exec(handle, agentCommand, { timeoutMs: 30_000 });
    assert.equal(r.exitCode, 0, r.stderr);
    return mode === 'in-place' ? await verifyInPlace(provider, handle, task) : await verifyCleanRoom(provider, handle, task, spec);
  } finally {
    await provider.teardown(handle);
  }
}

describe('sample tasks', { timeout: 300_000 }, () => {
  for (const name of readdirSync(examples).sort()) {
    test(`${name}: untouched start and known-bad score 0, the reference solution scores 1`, async () => {
      const report = await checkTask(loadTask(join(examples, name)), provider);
      assert.ok(report.passed, JSON.stringify(report.cases, null, 2));
      assert.ok(report.cases.length >= 3, 'start, at least one known-bad, reference');
    });
  }
});

describe('rollout task check (CLI)', { timeout: 300_000 }, () => {
  const cli = (...args: string[]) =>
    spawnSync(process.execPath, [join(root, 'client/bin/rollout.js'), 'task', 'check', ...args], {
      encoding: 'utf8',
      timeout: 120_000,
      env: { ...process.env, ROLLOUT_SANDBOX_ROOT: join(scratch, 'cli-state') },
    });

  test('a good task passes with exit 0', () => {
    const run = cli(join(examples, 'write-greeting'));
    assert.equal(run.status, 0, run.stdout + run.stderr);
    assert.match(run.stdout, /PASS {2}write-greeting/);
  });

  test('a verifier that rewards everything fails loudly with exit 1', () => {
    const lenient = taskVariant('write-greeting', 'lenient', (dir) => writeFileSync(join(dir, 'tests/test.sh'), '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n'));
    const run = cli(lenient.dir);
    assert.equal(run.status, 1, run.stdout + run.stderr);
    assert.match(run.stdout, /FAIL {2}lenient/);
    assert.match(run.stdout, /BAD {2}untouched start +expected 0, reward 1/);
  });

  test('an invalid task directory is exit 2 with the file and the fix', () => {
    const run = cli(join(scratch, 'does-not-exist'));
    assert.equal(run.status, 2);
    assert.match(run.stderr, /does-not-exist: is not a task directory\. Fix: /);
    assert.doesNotMatch(run.stderr, /^\s+at /m);
  });
});

describe('reward files, as Harbor reads them', { timeout: 300_000 }, () => {
  test('reward.json (named rewards) wins over reward.txt', async () => {
    const task = taskVariant('write-greeting', 'both-rewards', (dir) =>
      writeFileSync(join(dir, 'tests/test.sh'), '#!/bin/bash\necho 0 > /logs/verifier/reward.txt\necho \'{"reward": 0.75, "style": 1}\' > /logs/verifier/reward.json\n'),
    );
    const outcome = await attempt(task, 'true', 'in-place');
    assert.deepEqual([outcome.reward, outcome.source, outcome.metrics], [0.75, 'reward.json', { reward: 0.75, style: 1 }]);
  });

  test('an empty reward file is infra/verifier_crashed, not a zero', async () => {
    for (const file of ['reward.txt', 'reward.json']) {
      const task = taskVariant('write-greeting', `empty-${file}`, (dir) => writeFileSync(join(dir, 'tests/test.sh'), `#!/bin/bash\n: > /logs/verifier/${file}\n`));
      await assert.rejects(attempt(task, 'true', 'in-place'), (err: Error) => err.name === 'infra/verifier_crashed', file);
    }
  });
});

describe('verifier failures are infra, never a zero', { timeout: 300_000 }, () => {
  test('test.sh that writes no reward is infra/verifier_crashed', async () => {
    const task = taskVariant('write-greeting', 'crashing', (dir) => writeFileSync(join(dir, 'tests/test.sh'), '#!/bin/bash\necho "pytest: command not found" >&2\nexit 127\n'));
    await assert.rejects(attempt(task, 'true', 'in-place'), (err: Error) => err.name === 'infra/verifier_crashed' && /exited 127 without writing/.test(err.message) && /command not found/.test(err.message));
  });

  test('test.sh past its timeout is infra/verifier_timeout', async () => {
    const task = taskVariant('write-greeting', 'slow', (dir) => {
      writeFileSync(join(dir, 'tests/test.sh'), '#!/bin/bash\nsleep 30\necho 1 > /logs/verifier/reward.txt\n');
      writeFileSync(join(dir, 'task.toml'), '[verifier]\ntimeout_sec = 1.0\n[agent]\ntimeout_sec = 10.0\n[environment]\nnetwork_mode = "no-network"\n');
    });
    await assert.rejects(attempt(task, 'true', 'in-place'), (err: Error) => err.name === 'infra/verifier_timeout' && /\[verifier\]\.timeout_sec/.test(err.message));
  });
});

describe('what the agent left running, in-place (Harbor runs the tests beside it)', { timeout: 300_000 }, () => {
  // A server on the sandbox's loopback that serves the workspace, started by the agent and left running.
  const startServer = `setsid python3 -m http.server 8080 --bind 127.0.0.1 --directory /app >/dev/null 2>&1 < /dev/null & echo $! > /tmp/server.pid; for i in $(seq 100); do python3 -c "import socket; socket.create_connection(('127.0.0.1', 8080), 1)" 2>/dev/null && exit 0; sleep 0.1; done; exit 1`;
  const serviceTask = (): LoadedTask =>
    taskVariant('write-greeting', 'service', (dir) =>
      writeFileSync(
        join(dir, 'tests/test.sh'),
        `#!/bin/bash\nmkdir -p /logs/verifier\nbody=$(python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8080/served.txt', timeout=5).read().decode(), end='')")\nif [ "$body" = served ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n`,
      ),
    );

  // The sandbox beside is launched by the compiled helper, or without it by nsenter + unshare + a shell.
  const chainProvider = new LocalSandboxProvider({ stateRoot: join(scratch, 'state-chain'), execHelper: null });
  after(async () => assert.deepEqual(await chainProvider.list(), [], 'every sandbox of the program chain was torn down'));
  for (const [launcher, p] of [['helper', provider], ['program chain', chainProvider]] as const) {
    test(`a server the agent left running answers the tests, and still runs after them (${launcher})`, async () => {
      const task = serviceTask();
      const { handle } = await p.provision(sandboxSpecForTask(task, owner));
      try {
        const started = await p.exec(handle, `echo served > /app/served.txt && ${startServer}`, { timeoutMs: 30_000 });
        assert.equal(started.exitCode, 0, `the agent's server came up: ${started.stderr}`);
        const outcome = await verifyInPlace(p, handle, task);
        assert.equal(outcome.reward, 1, `the tests reached the agent's server: ${outcome.outputTail}`);
        // By its pid: a pgrep -f would find the shell that runs it, whose command line names the pattern.
        const after = await p.exec(handle, 'kill -0 "$(cat /tmp/server.pid)"', { timeoutMs: 10_000 });
        assert.equal(after.exitCode, 0, 'the server the agent left was not killed by the verifier');
      } finally {
        await p.teardown(handle);
      }
    });
  }

  test('clean-room: the tests do not reach it (the clean room has its own network and only the workspace)', async () => {
    const outcome = await attempt(serviceTask(), `echo served > /app/served.txt && ${startServer}`, 'clean-room');
    assert.equal(outcome.reward, 0);
  });

  // What a process left behind would watch for: the tests arriving in /tests, or the verifier's processes in /proc
  // (spelled so that neither its own command line nor grep's matches).
  const rewriter = (solve: string): string =>
    `setsid bash -c ${shellQuote(`echo $$ > /tmp/rewriter.pid; while :; do if [ -e /tests/tes"t".sh ] || [ -e /tests/test_stat"s".py ] || grep -qsa -e "tests/tes[t].sh" -e "test_stat[s]" /proc/[0-9]*/cmdline; then {\n${solve.trim()}\n}; mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; echo 1 > /tmp/rewrote; fi; sleep 0.01; done`)} >/dev/null 2>&1 < /dev/null & for i in $(seq 100); do [ -s /tmp/rewriter.pid ] && exit 0; sleep 0.05; done; exit 1`;

  test('a process left to rewrite the answer and the reward once the tests appear gets 0, and never saw them', async () => {
    const task = loadTask(join(examples, 'fix-median'));
    const solve = readFileSync(task.solutionScript ?? '', 'utf8').replace(/^#!.*\n/, '');
    const { handle } = await provider.provision(sandboxSpecForTask(task, owner));
    try {
      const left = await provider.exec(handle, rewriter(solve), { timeoutMs: 30_000 });
      assert.equal(left.exitCode, 0, left.stderr);
      const outcome = await verifyInPlace(provider, handle, task);
      assert.equal(outcome.reward, 0, `the rewriter did not change what the tests read or the reward: ${outcome.outputTail}`);
      const seen = await provider.exec(handle, 'kill -0 "$(cat /tmp/rewriter.pid)" && echo alive; cat /tmp/rewrote 2>/dev/null || echo never-triggered', { timeoutMs: 10_000 });
      assert.deepEqual(seen.stdout.trim().split('\n'), ['alive', 'never-triggered'], 'the rewriter ran through the whole verification and never saw the tests or the verifier');
    } finally {
      await provider.teardown(handle);
    }
  });

  test('the same rewriter scores 1 when the tests run where it can see them (what the isolation prevents)', async () => {
    // The control: this scoring 1 is what shows the rewriter works, so its 0 above is the verifier's doing.
    const task = loadTask(join(examples, 'fix-median'));
    const solve = readFileSync(task.solutionScript ?? '', 'utf8').replace(/^#!.*\n/, '');
    const { handle } = await provider.provision(sandboxSpecForTask(task, owner));
    try {
      assert.equal((await provider.exec(handle, rewriter(solve), { timeoutMs: 30_000 })).exitCode, 0);
      await uploadDirectory(provider, handle, task.testsDir, '/tests');
      await eventually(() => provider.exec(handle, 'cat /tmp/rewrote 2>/dev/null', { timeoutMs: 10_000 }), (r) => r.stdout.trim() === '1', 'the rewriter saw /tests in its own sandbox', 20_000);
      const run = await provider.exec(handle, 'bash /tests/test.sh; cat /logs/verifier/reward.txt', { timeoutMs: 60_000 });
      assert.equal(run.stdout.trim().split('\n').at(-1), '1');
    } finally {
      await provider.teardown(handle);
    }
  });

  test("tearing the agent's sandbox down takes a verifier's sandbox beside it along", async () => {
    const task = loadTask(join(examples, 'fix-median'));
    const { handle } = await provider.provision(sandboxSpecForTask(task, owner));
    const { handle: beside } = await provider.provisionBeside(handle, { labels: { purpose: 'verifier' } });
    assert.deepEqual((await provider.list()).map((r) => r.id).sort(), [handle.id, beside.id].sort());
    const probe = await provider.exec(beside, 'echo from-beside > /app/beside.txt; ls /proc | grep -c "^[0-9]"', { timeoutMs: 10_000 });
    assert.equal(probe.exitCode, 0, probe.stderr);
    assert.equal((await provider.exec(handle, 'cat /app/beside.txt', { timeoutMs: 10_000 })).stdout.trim(), 'from-beside', 'both see one root filesystem');
    await provider.teardown(handle);
    assert.deepEqual(await provider.list(), [], 'no sandbox is left');
  });
});

describe('tampering never earns reward 1', { timeout: 300_000 }, () => {
  const median = (): LoadedTask => loadTask(join(examples, 'fix-median'));
  const tampers: Record<string, string> = {
    'a fake reward file written before verify': 'mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt',
    'a fake test runner planted in /tests': 'printf "#!/bin/bash\\necho 1 > /logs/verifier/reward.txt\\n" > /tests/test.sh',
    'a background process that keeps writing reward 1': 'setsid bash -c "while :; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; sleep 0.01; done" >/dev/null 2>&1 &',
    'a python usercustomize that exits 0 before any test runs':
      // The last command proves the plant works: python exits 0 although the script says exit 3.
      'd=/root/.local/lib/python3.11/site-packages && mkdir -p $d && echo "import os; os._exit(0)" > $d/usercustomize.py && python3 -c "raise SystemExit(3)"',
    // Root without capabilities cannot overwrite a 0444 file: before the reset removed the link, this scored 1 in-place.
    'a link where /logs/verifier was, to read-only reward files in a locked workspace directory':
      'mkdir /app/.v && echo 1 > /app/.v/reward.txt && chmod 444 /app/.v/reward.txt && chmod 555 /app/.v && rm -rf /logs/verifier && ln -s /app/.v /logs/verifier',
    // Before the host-side stop, the verifier could not start a process in the full pids cgroup: infra, masked, not 0.
    'a fork bomb left running at the pids limit when the agent stops':
      'setsid bash -c \':(){ :|:& };:\' >/dev/null 2>&1 & sleep 3; echo spawned',
    'a planted file locked in read-only directories of /root and /tests':
      'mkdir -p /root/locked && echo "exit 0" > /root/locked/x && chmod 555 /root/locked /tests && echo 1 > /tmp/reward.txt && chmod 555 /tmp',
  };
  for (const mode of ['in-place', 'clean-room'] as const) {
    for (const [name, command] of Object.entries(tampers)) {
      test(`${mode}: ${name}`, async () => {
        const outcome = await attempt(median(), command, mode);
        assert.equal(outcome.reward, 0);
        assert.equal(outcome.mode, mode);
      });
    }
    test(`${mode}: an honest fix still scores 1`, async () => {
      const task = median();
      const solve = `bash -c ${shellQuote(readFileSync(task.solutionScript ?? '', 'utf8'))}`;
      const outcome = await attempt(task, solve, mode);
      assert.equal(outcome.reward, 1);
    });
  }

  test('clean-room: read-only and unreadable directories arrive with their modes (tar as root without capabilities could not)', async () => {
    const listing = "cd /app && find . -mindepth 1 -printf '%m %p\\n' 2>/dev/null";
    const task = taskVariant('write-greeting', 'modes', (dir) => writeFileSync(join(dir, 'tests/test.sh'), `#!/bin/bash\n${listing}\necho 1 > /logs/verifier/reward.txt\n`));
    const setup = 'mkdir -p /app/ro /app/none/inner && echo y > /app/ro/file && chmod 444 /app/ro/file && chmod 555 /app/ro && echo z > /app/none/inner/g && chmod 000 /app/none/inner /app/none';
    const outcome = await attempt(task, setup, 'clean-room');
    assert.equal(outcome.reward, 1);
    assert.deepEqual(outcome.outputTail.split('\n').sort(), ['0 ./none', '444 ./ro/file', '555 ./ro', '644 ./.keep']);
  });

  test('clean-room: files the agent deleted stay deleted, edits carry over', async () => {
    const task = taskVariant('fix-median', 'deletes', (dir) => writeFileSync(join(dir, 'tests/test.sh'), '#!/bin/bash\nif [ ! -e /app/stats.py ] && [ "$(cat /app/new.txt)" = new ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n'));
    const outcome = await attempt(task, 'rm /app/stats.py && echo new > /app/new.txt', 'clean-room');
    assert.equal(outcome.reward, 1);
  });
});
