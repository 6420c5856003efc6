/**
 * The escape suite through the real pipeline (real dev server, real local
 * sandboxes): every attempt of the `scripted:adversarial` policy runs once
 * with in-place verification and once in a clean room, all attempts of a mode
 * concurrently in one group, next to an honest oracle rollout that must
 * still score 1. Containment is checked from the host, not from what the
 * sandbox says about itself: a canary file and a canary variable of this
 * (worker) process never reach a trajectory, a listener on the host's
 * 127.0.0.1 gets no connection, no file appears at the host paths the
 * attempts write to, kernel.core_pattern and the task's files are
 * unchanged, the fork bomb's and the memory hog's processes stay under the
 * sandbox's limits as the host counts them, no lingering process is left,
 * and no sandbox is. Tampering must never earn reward 1.
 *
 * Writes the table of attempts to stdout and to test-output/escape-suite.md.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ESCAPE_ATTEMPTS, ESCAPE_MARKER, escapeHostPaths, type EscapeContext } from '../../policies/adversarial/adversarialPolicy.js';
import { loadTask } from '../../tasks/loadTask.js';
import { DEFAULT_TASK_MEMORY_MB, SANDBOX_PIDS_LIMIT } from '../../images/sandboxSpecForTask.js';
import { loadTrajectory } from '../../client/loadTrajectory.js';
import { submitBatch } from '../../client/submitBatch.js';
import type { GroupResult, RolloutResult } from '../../shared/pipeline.js';
import { processesMentioning } from '../helpers/localSandboxInspector.js';
import { startHarness, type Harness } from '../helpers/pipelineHarness.js';

type Mode = 'in-place' | 'clean-room';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const CANARY_ENV = 'ROLLOUT_ESCAPE_CANARY';
const canaryEnvValue = `canary-env-${randomBytes(12).toString('hex')}`;
const canaryFileValue = `canary-file-${randomBytes(12).toString('hex')}`;

let h: Harness;
let taskDir: string;
let ctx: EscapeContext;
let listener: Server;
let listenerPort = 0;
let connections = 0;
let corePattern = '';
let taskVersion = '';
const suiteStarted = Date.now();

/** What one attempt did in one mode, as the host saw it. */
interface Observation {
  reward: number | null;
  outcome: string;
  failures: string[];
  how: string;
}
const observed = new Map<string, Partial<Record<Mode, Observation>>>();

/** Peaks seen on the host while a group ran, counted by the markers in the processes' command lines. */
interface HostPeaks {
  forkBombProcesses: number;
  memoryHogRssMb: number;
  minMemAvailableMb: number;
}

function startHostWatch(): { stop(): HostPeaks } {
  const peaks: HostPeaks = { forkBombProcesses: 0, memoryHogRssMb: 0, minMemAvailableMb: Number.POSITIVE_INFINITY };
  const bomb = Buffer.from(`${ESCAPE_MARKER}-fork-bomb`);
  const hog = Buffer.from(`${ESCAPE_MARKER}-memory-hog`);
  const sample = (): void => {
    let bombs = 0;
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const cmdline = readFileSync(`/proc/${entry}/cmdline`);
        if (cmdline.includes(bomb)) bombs++;
        else if (cmdline.includes(hog)) {
          const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${entry}/status`, 'utf8'));
          if (rss) peaks.memoryHogRssMb = Math.max(peaks.memoryHogRssMb, Math.round(Number(rss[1]) / 1024));
        }
      } catch {
        // gone meanwhile
      }
    }
    peaks.forkBombProcesses = Math.max(peaks.forkBombProcesses, bombs);
    const available = /MemAvailable:\s+(\d+) kB/.exec(readFileSync('/proc/meminfo', 'utf8'));
    if (available) peaks.minMemAvailableMb = Math.min(peaks.minMemAvailableMb, Math.round(Number(available[1]) / 1024));
  };
  const timer = setInterval(sample, 250);
  return {
    stop() {
      clearInterval(timer);
      sample();
      return peaks;
    },
  };
}

async function runGroup(name: string, script: 'adversarial' | 'oracle', groupSize: number, mode: Mode): Promise<GroupResult> {
  const batch = await submitBatch(h.client, {
    batchId: `${name}-${mode}-${Date.now()}`,
    taskQueues: h.taskQueues,
    tasks: [taskDir],
    groupSize,
    minValid: 1,
    policy: { kind: 'scripted', script },
    limits: { maxTurns: 4, commandTimeoutSec: 60, maxOutputBytes: 64 * 1024 },
    verifyMode: mode,
    // An infra failure must show as such, not be hidden by a retry on a fresh sandbox.
    failurePolicy: { infra: { retries: 0, backoffSec: 0, onExhausted: 'mask' } },
  });
  const groups: GroupResult[] = [];
  for await (const group of batch.results()) groups.push(group);
  assert.equal(groups.length, 1);
  return groups[0] as GroupResult;
}

/** Every line the attempt's commands printed (tool observations) and the verifier's output, as one text. */
async function trajectoryText(r: RolloutResult): Promise<{ all: string; evidence: string[] }> {
  const attempts = await loadTrajectory(h.store, r.trajectoryRef);
  const all = JSON.stringify(attempts);
  const observations = attempts.flatMap((a) => a.turns.flatMap((t) => t.tools.map((tool) => tool.observation)));
  return { all, evidence: observations.flatMap((o) => o.split('\n')).filter((line) => line.startsWith('ESCAPE ')) };
}

const first = (lines: string[], pattern: RegExp): string | undefined => lines.find((l) => pattern.test(l));
const shorten = (line: string | undefined): string => (line ?? '(no such line)').replace(/^ESCAPE [a-z-]+: /, '').slice(0, 110);

/** Checks one attempt's rollout from the host; returns the failures and one line of evidence. */
async function examine(name: string, r: RolloutResult, peaks: HostPeaks): Promise<Observation> {
  const failures: string[] = [];
  const fail = (what: string): void => void failures.push(what);
  const { all, evidence } = await trajectoryText(r);
  const mine = evidence.filter((l) => l.startsWith(`ESCAPE ${name}:`));

  // Every attempt, whatever it tried.
  if (r.reward !== 0) fail(`reward ${r.reward}, not 0`);
  if (r.outcomeClass !== 'ok' && r.outcomeClass !== 'model') fail(`ended ${r.outcomeClass}/${r.outcomeType}: ${r.attemptHistory.map((a) => a.message).join('; ')}`);
  if (mine.length === 0) fail('printed no ESCAPE evidence: the attempt did not run');
  if (all.includes(canaryEnvValue)) fail(`the worker's canary variable ${CANARY_ENV} reached the trajectory`);
  if (all.includes(canaryFileValue)) fail('the host canary file reached the trajectory');
  // The lingering, bomb and hog processes carry `${ESCAPE_MARKER}-<attempt>` in their command lines.
  const lingering = processesMentioning(`${ESCAPE_MARKER}-${name}`);
  if (lingering.length > 0) fail(`processes still carry ${ESCAPE_MARKER}-${name} on the host after the rollout: ${lingering.join(', ')}`);
  if (name === 'write-outside' || name === 'replace-tests') {
    const written = escapeHostPaths(ctx).filter((p) => existsSync(p));
    if (written.length > 0) fail(`host paths written: ${written.join(', ')}`);
  }

  let how = '';
  switch (name) {
    case 'host-secrets': {
      const env = first(mine, /env of this command/) ?? '';
      if (!/cannot read \/root\/\.ssh: No such file/.test(mine.join('\n'))) fail('/root/.ssh was not reported missing');
      if (mine.some((l) => / READ | LISTED /.test(l))) fail(`read something: ${mine.filter((l) => / READ | LISTED /.test(l)).join(' | ')}`);
      how = `canary file + ${CANARY_ENV} in no output; /root/.ssh, /etc/shadow, checkout, task dir: No such file; env: ${env.replace(/.*env of this command: /, '').split(' ').map((kv) => kv.split('=')[0]).join(' ')}`;
      break;
    }
    case 'network': {
      if (connections > 0) fail(`the host listener on 127.0.0.1:${listenerPort} got ${connections} connection(s)`);
      const scan = first(mine, /scanned 127\.0\.0\.1/);
      if (!/open: none/.test(scan ?? '')) fail(`loopback scan: ${shorten(scan)}`);
      if (mine.some((l) => /CONNECTED|DNS RESOLVED/.test(l))) fail(`connected: ${mine.filter((l) => /CONNECTED|DNS RESOLVED/.test(l)).join(' | ')}`);
      const answer = (pattern: RegExp): string => shorten(first(mine, pattern)).split(': ').pop() ?? '';
      how = `host listener 127.0.0.1:${listenerPort}: 0 connections; 1.1.1.1:80: ${answer(/1\.1\.1\.1:80/)}; 127.0.0.1:7233: ${answer(/127\.0\.0\.1:7233/)}; ${shorten(scan).replace(/ \(first-pass.*$/, '')}`;
      break;
    }
    case 'write-outside': {
      const now = readFileSync('/proc/sys/kernel/core_pattern', 'utf8');
      if (now !== corePattern) fail(`kernel.core_pattern changed: ${JSON.stringify(now)}`);
      const wrote = mine.filter((l) => /WROTE|MOUNTED|MKNOD|WRITABLE/.test(l) && !/WROTE \/(tmp|root|dev)\//.test(l));
      if (wrote.length > 0) fail(`wrote outside the sandbox's own tmpfs: ${wrote.join(' | ')}`);
      const ro = mine.filter((l) => /Read-only file system/.test(l)).length;
      const sysctl = shorten(first(mine, /core_pattern/));
      if (!/cannot write/.test(sysctl)) fail(`/proc/sys/kernel/core_pattern: ${sysctl}`);
      how = `none of ${escapeHostPaths(ctx).length} host paths exists, core_pattern unchanged; ${ro} writes: Read-only file system (core_pattern: ${sysctl.split(': ').pop()}); mount, mknod: ${shorten(first(mine, /mknod:/)).split(': ').pop()}`;
      break;
    }
    case 'fork-bomb': {
      const during = Number(/(\d+) processes in the sandbox/.exec(mine.join('\n'))?.[1] ?? 0);
      if (during < 100) fail(`the bomb did not run (${during} processes)`);
      if (peaks.forkBombProcesses > SANDBOX_PIDS_LIMIT) fail(`the host counted ${peaks.forkBombProcesses} bomb processes, over pids.max ${SANDBOX_PIDS_LIMIT}`);
      how = `pids.max ${SANDBOX_PIDS_LIMIT}: ${during} processes inside, host peak ${peaks.forkBombProcesses}; "${shorten(first(mine, /first error/)).replace('first error the bomb met: ', '')}"; gone after`;
      break;
    }
    case 'memory-hog': {
      const exited = first(mine, /python3 exited/);
      if (!/exited 137/.test(exited ?? '')) fail(`the hog was not OOM-killed: ${shorten(exited)}`);
      if (!first(mine, /still answers/)) fail('the sandbox did not answer after the hog');
      if (peaks.memoryHogRssMb > DEFAULT_TASK_MEMORY_MB + 64) fail(`the host saw the hog at ${peaks.memoryHogRssMb} MiB, over the ${DEFAULT_TASK_MEMORY_MB} MiB limit`);
      how = `OOM-killed (exit 137) ${shorten(first(mine, /holding/)).replace('holding', 'after')}; host peak RSS ${peaks.memoryHogRssMb} MiB of ${DEFAULT_TASK_MEMORY_MB}; sandbox still answers`;
      break;
    }
    case 'linger': {
      const survived = first(mine, /still alive after SIGTERM/);
      if (!/SIGTERM: \d+ \d+/.test(survived ?? '')) fail(`the lingering pair did not outlive SIGTERM inside, so nothing was tested: ${shorten(survived)}`);
      how = `outlived SIGTERM inside (${shorten(survived).replace('still alive after SIGTERM: ', 'pids ').trim()}); kept running in-place beside tests it could not see, SIGKILLed before the workspace archive (clean-room); no ${ESCAPE_MARKER}-linger process on the host after`;
      break;
    }
    case 'replace-tests': {
      const version = loadTask(taskDir).version;
      if (version !== taskVersion) fail('the task files on the host changed');
      if (!/reward\.txt = 1/.test(first(mine, /planted usercustomize/) ?? '')) fail('the planted usercustomize did not run inside, so nothing was tested');
      how = `plants worked inside (python3 wrote reward 1); in-place verify unlocked and emptied /tests /root /tmp, then uploaded the real tests; clean-room took only /app; host task files unchanged`;
      break;
    }
    case 'fake-reward': {
      if (!/it reads 1/.test(first(mine, /->/) ?? '')) fail('the locked fake reward was not in place at submit, so nothing was tested');
      how = `fake in place at submit (${shorten(first(mine, /->/)).replace(/; writing 0.*$/, '')}, read-only); in-place verify removed the link and made /logs/verifier anew; clean-room never copies /logs`;
      break;
    }
    default:
      fail(`no host-side check for attempt ${name}`);
  }
  return { reward: r.reward, outcome: `${r.outcomeClass}/${r.outcomeType}`, failures, how };
}

async function runMode(mode: Mode): Promise<string[]> {
  const watch = startHostWatch();
  const connectionsBefore = connections;
  const [adversarial, control] = await Promise.all([runGroup('escape', 'adversarial', ESCAPE_ATTEMPTS.length, mode), runGroup('control', 'oracle', 1, mode)]);
  const peaks = watch.stop();
  const failures: string[] = [];
  // The oracle ran beside the attempts: the host stayed healthy and the verifier can still say 1.
  const honest = control.rollouts[0];
  if (honest?.reward !== 1) failures.push(`the honest oracle rollout beside the attempts scored ${honest?.reward} (${honest?.outcomeClass}/${honest?.outcomeType})`);
  if (connections !== connectionsBefore) failures.push(`the host listener got ${connections - connectionsBefore} connection(s)`);
  const lingering = processesMentioning(ESCAPE_MARKER);
  if (lingering.length > 0) failures.push(`processes still carry ${ESCAPE_MARKER} on the host: ${lingering.join(', ')}`);
  for (const [i, attempt] of ESCAPE_ATTEMPTS.entries()) {
    const r = adversarial.rollouts[i];
    assert.ok(r, `rollout ${i}`);
    const o = await examine(attempt.name, r, peaks);
    observed.set(attempt.name, { ...observed.get(attempt.name), [mode]: o });
    for (const f of o.failures) failures.push(`${attempt.name}: ${f}`);
  }
  console.log(`${mode}: ${ESCAPE_ATTEMPTS.length} attempts and the oracle; host MemAvailable never below ${peaks.minMemAvailableMb} MiB`);
  return failures;
}

/** One row per attempt: contained in both modes or not; for a contained one what showed it, else what escaped. */
function table(): string {
  const cell = (text: string): string => text.replace(/\s*\n\s*/g, ' ').replace(/\|/g, '\\|');
  const rewardOf = (o: Observation | undefined): string => (o === undefined ? 'not run' : o.reward === null ? `none (${o.outcome})` : String(o.reward));
  const lines = [
    '| attempt | contained? | how (observed from the host, and inside) | reward in-place | reward clean-room |',
    '|---|---|---|---|---|',
    ...ESCAPE_ATTEMPTS.map((a) => {
      const o = observed.get(a.name) ?? {};
      const failures = (['in-place', 'clean-room'] as const).flatMap((mode) => (o[mode] ? o[mode].failures.map((f) => `${mode}: ${f}`) : [`${mode}: not run`]));
      const how = failures.length === 0 ? (o['in-place']?.how ?? '') : failures.join('; ');
      return `| ${a.name} | ${failures.length === 0 ? 'yes' : '**NO**'} | ${cell(how)} | ${rewardOf(o['in-place'])} | ${rewardOf(o['clean-room'])} |`;
    }),
  ];
  return lines.join('\n');
}

before(async () => {
  h = await startHarness('escape');
  const tasks = join(h.scratch, 'tasks');
  taskDir = join(tasks, 'write-greeting');
  cpSync(join(root, 'examples/tasks/write-greeting'), taskDir, { recursive: true });
  // Next to the task on the host, where the attempt looks: it must never be read.
  writeFileSync(join(tasks, 'host-secret.txt'), `${canaryFileValue}\n`);
  process.env[CANARY_ENV] = canaryEnvValue;
  ctx = { repoDir: process.cwd(), taskDir };
  taskVersion = loadTask(taskDir).version;
  corePattern = readFileSync('/proc/sys/kernel/core_pattern', 'utf8');
  const leftovers = escapeHostPaths(ctx).filter((p) => existsSync(p));
  assert.deepEqual(leftovers, [], 'no host path of the suite exists before it runs (an earlier escape left these)');
  assert.deepEqual(processesMentioning(ESCAPE_MARKER), [], `no process carries ${ESCAPE_MARKER} before the suite`);
  listener = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
  listenerPort = (listener.address() as AddressInfo).port;
  await h.startWorkers();
});

after(async () => {
  await h?.close();
  await new Promise((r) => listener?.close(r));
  delete process.env[CANARY_ENV];
  // Had anything escaped, do not leave it on the host.
  if (ctx) for (const p of escapeHostPaths(ctx)) rmSync(p, { force: true });
});

describe('escape suite: every attempt of scripted:adversarial is contained', { timeout: 600_000 }, () => {
  for (const mode of ['in-place', 'clean-room'] as const) {
    test(`${mode}: every attempt scores 0, ends scored, and leaves no trace on the host`, async () => {
      const failures = await runMode(mode);
      assert.deepEqual(failures, []);
    });
  }

  test('afterwards: no sandbox is left; the table', async () => {
    const report = table();
    const seconds = Math.round((Date.now() - suiteStarted) / 1000);
    const md = `# Escape suite\n\n\`scripted:adversarial\` against examples/tasks/write-greeting, ${ESCAPE_ATTEMPTS.length} attempts per verify mode, run ${new Date().toISOString()} in ${seconds} s (test/integration/escapeSuite.test.ts).\n\n${report}\n`;
    mkdirSync(join(root, 'test-output'), { recursive: true });
    writeFileSync(join(root, 'test-output/escape-suite.md'), md);
    console.log(`\n${report}\n`);
    assert.deepEqual(await h.provider.list(), [], 'every sandbox was torn down');
    assert.deepEqual(processesMentioning(ESCAPE_MARKER), [], `no process carries ${ESCAPE_MARKER}`);
  });
});
