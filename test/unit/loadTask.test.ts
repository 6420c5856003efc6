/** Task directories: what loads, and what a bad one is told (file, field, fix). */
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadTask } from '../../tasks/loadTask.js';
import { sandboxSpecForTask } from '../../images/sandboxSpecForTask.js';
import { describeNetwork, parseNetworkMode, withNetwork } from '../../tasks/taskNetwork.js';

const examples = resolve(dirname(fileURLToPath(import.meta.url)), '../../examples/tasks');
const scratch = mkdtempSync(join(tmpdir(), 'load-task-test-'));

function copyExample(name: string, as: string): string {
  const dir = join(scratch, as);
  cpSync(join(examples, name), dir, { recursive: true });
  return dir;
}

function invalid(dir: string, pattern: RegExp): void {
  assert.throws(
    () => loadTask(dir),
    (err: Error) => {
      assert.equal(err.name, 'task/invalid_spec');
      assert.match(err.message, pattern);
      assert.match(err.message, /Fix: /);
      return true;
    },
  );
}

test('a sample task loads with its limits, timeouts and hashes', () => {
  const task = loadTask(join(examples, 'fix-median'));
  assert.equal(task.id, 'fix-median');
  assert.equal(task.agentTimeoutSec, 300);
  assert.equal(task.verifierTimeoutSec, 60);
  assert.deepEqual(task.limits, { memoryMb: 512, cpus: 1, diskMb: 256 });
  assert.equal(task.workdir, '/app');
  assert.match(task.version, /^[0-9a-f]{64}$/);
  assert.equal(task.knownBadScripts.length, 2);
  assert.deepEqual(task.warnings, []);
});

test('the version is the content hash: equal for a copy, different after any edit', () => {
  const original = loadTask(join(examples, 'write-greeting'));
  const dir = copyExample('write-greeting', 'greeting-copy');
  assert.equal(loadTask(dir).version, original.version);
  writeFileSync(join(dir, 'tests/test.sh'), '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n');
  const edited = loadTask(dir);
  assert.notEqual(edited.version, original.version);
  assert.notEqual(edited.verifierHash, original.verifierHash);
  assert.equal(edited.environmentHash, original.environmentHash);
});

test('a missing directory or file names it and what to add', () => {
  invalid(join(scratch, 'nope'), /nope: is not a task directory/);
  const dir = copyExample('write-greeting', 'no-instruction');
  rmSync(join(dir, 'instruction.md'));
  invalid(dir, /instruction\.md: missing/);
  const noTests = copyExample('write-greeting', 'no-tests');
  rmSync(join(noTests, 'tests'), { recursive: true });
  invalid(noTests, /tests\/test\.sh: missing.*reward\.txt/);
  const noEnv = copyExample('write-greeting', 'no-env');
  rmSync(join(noEnv, 'environment'), { recursive: true });
  invalid(noEnv, /environment: missing.*may be empty/);
});

test('bad TOML names the line and column', () => {
  const dir = copyExample('write-greeting', 'bad-toml');
  writeFileSync(join(dir, 'task.toml'), '[agent]\ntimeout_sec = = 3\n');
  invalid(dir, /task\.toml: line 2, column \d+: not valid TOML/);
});

test('a field of the wrong type names the section, the field and an example fix', () => {
  const dir = copyExample('write-greeting', 'bad-field');
  writeFileSync(join(dir, 'task.toml'), '[agent]\ntimeout_sec = "ten minutes"\n');
  invalid(dir, /task\.toml: \[agent\]\.timeout_sec: .*Fix: give seconds as a positive number, e\.g\. timeout_sec = 120\.0/);
  writeFileSync(join(dir, 'task.toml'), '[environment]\nmemory = "lots"\n');
  invalid(dir, /\[environment\]\.memory: .*Fix: use a size such as memory = "4G"/);
});

test('unknown keys are ignored with a warning, as Harbor does', () => {
  const dir = copyExample('write-greeting', 'unknown-keys');
  writeFileSync(join(dir, 'task.toml'), '[agent]\ntimeout_sec = 10.0\nfavourite_colour = "blue"\n[extras]\nx = 1\n');
  const task = loadTask(dir);
  assert.deepEqual(task.warnings, ['task.toml: unknown key [agent].favourite_colour is ignored', 'task.toml: unknown key "extras" is ignored']);
});

test('Harbor size strings become MiB limits', () => {
  const dir = copyExample('write-greeting', 'sizes');
  writeFileSync(join(dir, 'task.toml'), '[environment]\nmemory = "2G"\nstorage = "512M"\ncpus = 0.5\nallow_internet = true\n');
  const task = loadTask(dir);
  assert.deepEqual(task.limits, { memoryMb: 2048, cpus: 0.5, diskMb: 512 });
  const spec = sandboxSpecForTask(task, { workflowId: 'w', runId: 'r', attempt: 0 });
  assert.equal(spec.network, 'public');
});

test('every sandbox gets a memory and a pids ceiling: Harbor\'s 2048 MiB unless the task declares memory', () => {
  const bare = sandboxSpecForTask(loadTask(join(examples, 'write-greeting')), { workflowId: 'w', runId: 'r', attempt: 0 });
  assert.deepEqual(bare.limits, { memoryMb: 2048, pids: 1024 });
  const dir = copyExample('write-greeting', 'declared-memory');
  writeFileSync(join(dir, 'task.toml'), '[environment]\nmemory_mb = 512\ncpus = 1\n');
  assert.deepEqual(sandboxSpecForTask(loadTask(dir), { workflowId: 'w', runId: 'r', attempt: 0 }).limits, { memoryMb: 512, pids: 1024, cpus: 1 });
});

test('a Dockerfile-only environment is refused by the local provider, plainly', () => {
  const dir = copyExample('write-greeting', 'docker-task');
  mkdirSync(join(dir, 'environment'), { recursive: true });
  writeFileSync(join(dir, 'environment/Dockerfile'), 'FROM python:3.11-slim\n');
  const task = loadTask(dir);
  assert.equal(task.needsContainer, true);
  assert.throws(() => sandboxSpecForTask(task, { workflowId: 'w', runId: 'r', attempt: 0 }), /runs a Dockerfile task only on an image built here\. Fix: build it with `rollout env build`/);
});

test("Harbor's current task.toml schema loads; what cannot be honoured is refused, what is not applied is said", () => {
  const dir = copyExample('write-greeting', 'current-schema');
  writeFileSync(
    join(dir, 'task.toml'),
    [
      'schema_version = "1.1"',
      '[task]\nname = "write-greeting"',
      '[verifier]\ntimeout_sec = 60.0\nuser = "root"\nnetwork_mode = "none"\nenvironment_mode = "shared"',
      '[agent]\ntimeout_sec = 90.0\nnetwork_mode = "public"',
      '[environment]\nos = "linux"\ncpus = 1\nmemory_mb = 1024\nstorage_mb = 2048\ngpus = 0\nworkdir = "/work"\nbuild_timeout_sec = 300.0',
    ].join('\n'),
  );
  const task = loadTask(dir);
  assert.deepEqual(task.limits, { memoryMb: 1024, cpus: 1, diskMb: 2048 });
  assert.deepEqual([task.workdir, task.declaredWorkdir, task.network.mode, task.agentTimeoutSec], ['/work', '/work', 'public', 90]);
  assert.deepEqual(task.warnings, [
    'task.toml: [verifier].network_mode = "none" is not applied: the verifier shares the agent\'s sandbox (network public); what tests/test.sh downloads is provided offline',
    'task.toml: [verifier].environment_mode = "shared" is not applied: the batch\'s verifyMode (in-place or clean-room) decides where tests run',
  ]);
  const refused: [string, RegExp][] = [
    ['[environment]\ngpus = 1', /\[environment\]\.gpus: 1 GPUs requested.*Fix: /],
    ['[agent]\nuser = "agent"', /\[agent\]\.user: user = "agent".*Fix: drop the setting/],
    ['[environment]\nos = "windows"', /\[environment\]\.os: os = "windows"/],
    ['[agent]\nnetwork_mode = "bridge"', /\[agent\]\.network_mode: .*Fix: use network_mode = "public" \(Harbor's default\) or "no-network"/],
    ['[agent]\nnetwork_mode = "allowlist"\nallowed_hosts = ["pypi.org"]', /\[agent\]\.network_mode: "allowlist" \(only pypi\.org\) cannot be enforced.*Fix: use network_mode = "public" or "no-network"/],
  ];
  for (const [toml, pattern] of refused) {
    writeFileSync(join(dir, 'task.toml'), toml);
    invalid(dir, pattern);
  }
  writeFileSync(join(dir, 'task.toml'), '[agent]\ntimeout_sec = 10.0\n');
  writeFileSync(join(dir, 'environment/compose.yaml'), 'services: {}\n');
  invalid(dir, /compose\.yaml: a compose file asks for sidecar services/);
});

test("a task's network follows Harbor's rules: the internet unless task.toml says otherwise; a batch's choice is recorded beside the task's", () => {
  const dir = copyExample('write-greeting', 'network-rules');
  const networkOf = (toml: string): [string, string] => {
    writeFileSync(join(dir, 'task.toml'), toml);
    const { network } = loadTask(dir);
    return [network.mode, network.source];
  };
  assert.deepEqual(networkOf('[agent]\ntimeout_sec = 60.0\n'), ['public', "Harbor's default (task.toml sets no network_mode or allow_internet)"]);
  assert.deepEqual(networkOf('[environment]\nnetwork_mode = "no-network"\n'), ['none', 'task.toml [environment].network_mode = "no-network"']);
  assert.deepEqual(networkOf('[environment]\nnetwork_mode = "none"\n'), ['none', 'task.toml [environment].network_mode = "none"']);
  assert.deepEqual(networkOf('version = "1.0"\n[environment]\nallow_internet = false\n'), ['none', 'task.toml [environment].allow_internet = false']);
  assert.deepEqual(networkOf('version = "1.0"\n[environment]\nallow_internet = true\n'), ['public', 'task.toml [environment].allow_internet = true']);
  // The agent phase overrides the environment's baseline (the sandbox is the agent's).
  assert.deepEqual(networkOf('[environment]\nnetwork_mode = "no-network"\n[agent]\nnetwork_mode = "public"\n'), ['public', 'task.toml [agent].network_mode = "public"']);
  // What a sandbox is given follows it; an override keeps what the task itself said.
  writeFileSync(join(dir, 'task.toml'), '[agent]\ntimeout_sec = 60.0\n');
  const task = loadTask(dir);
  assert.equal(sandboxSpecForTask(task, { workflowId: 'w', runId: 'r', attempt: 0 }).network, 'public');
  const overridden = withNetwork(task, 'none', 'rollout run --network none');
  assert.equal(sandboxSpecForTask(overridden, { workflowId: 'w', runId: 'r', attempt: 0 }).network, 'none');
  assert.equal(describeNetwork(overridden.network), "none (rollout run --network none; the task's own: public, from Harbor's default (task.toml sets no network_mode or allow_internet))");
  assert.equal(withNetwork(task, undefined, 'unused'), task);
  assert.throws(() => parseNetworkMode('bridge', '--network'), /--network "bridge": use none .* or public/);
  assert.equal(parseNetworkMode('no-network', '--network'), 'none');
});

test("Terminal-Bench 2.0's legacy task.toml loads without warnings", () => {
  const dir = copyExample('write-greeting', 'tb2-legacy');
  writeFileSync(
    join(dir, 'task.toml'),
    'version = "1.0"\n[metadata]\nauthor_name = "x"\ntags = ["bash"]\n[verifier]\ntimeout_sec = 900.0\n[agent]\ntimeout_sec = 900.0\n[environment]\nbuild_timeout_sec = 600.0\ncpus = 1\nmemory = "2G"\nstorage = "10G"\ndocker_image = "alexgshaw/headless-terminal:20251031"\n',
  );
  const task = loadTask(dir);
  assert.deepEqual(task.limits, { memoryMb: 2048, cpus: 1, diskMb: 10240 });
  assert.equal(task.config.environment.build_timeout_sec, 600);
  assert.deepEqual(task.warnings, []);
});
