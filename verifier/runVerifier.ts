/**
 * Verification of one attempt, after the agent has stopped.
 *
 * in-place:   the tests run on the agent's files as they are. Where the
 *             provider can (provisionBeside: the local provider), they run in
 *             a sandbox beside the agent's: the same root filesystem and
 *             network, so what the agent left running (a server the tests
 *             call) keeps running as under Harbor, but processes, /tests,
 *             /logs, /tmp and /root of its own that the agent's processes
 *             cannot see: a process the agent left cannot see the tests'
 *             files or processes, read them, or write the reward (it shares
 *             their network namespace, so it can see their sockets in /proc/net;
 *             docs/verifier-integrity.md). Elsewhere every process
 *             the agent left is killed first. Either way /tests, /logs/verifier
 *             (a reward file written by the agent), /root and /tmp are unlocked
 *             and emptied (RESET_FOR_TESTS); the task's tests are uploaded to
 *             /tests and tests/test.sh runs.
 * clean-room: only the agent's workspace is copied into a fresh sandbox from
 *             the same spec, and the tests run there: a replaced test runner
 *             outside the workspace or a lingering process cannot reach them.
 *
 * A verifier that crashes, times out or writes no reward is infra, never 0.
 */
import { randomBytes } from 'node:crypto';
import { ClassifiedError } from '../shared/failures.js';
import type { SandboxHandle, SandboxProvider, SandboxSpec } from '../shared/sandbox.js';
import type { LoadedTask } from '../shared/task.js';
import { shellQuote, uploadDirectory } from '../sandboxes/uploadDirectory.js';
import { parseRewardJson, parseRewardTxt, type Reward } from './parseReward.js';

export type VerifyMode = 'in-place' | 'clean-room';

export interface VerifyOutcome extends Reward {
  exitCode: number;
  durationMs: number;
  /** The last lines test.sh printed, for the trajectory. */
  outputTail: string;
  mode: VerifyMode;
}

/**
 * Kills every process in the sandbox but its init (pid 1) and this shell,
 * until none is left. Lists /proc with shell builtins only, so the
 * loop never counts its own helpers.
 */
export const STOP_AGENT_PROCESSES = `for round in {1..50}; do
  victims=""
  for d in /proc/[0-9]*; do p=\${d#/proc/}; if [ "$p" -gt 1 ] && [ "$p" != "$$" ]; then victims="$victims $p"; fi; done
  [ -z "$victims" ] && exit 0
  kill -9 $victims 2>/dev/null
  sleep 0.02
done
echo "agent processes kept respawning" >&2`;

const MAX_WORKSPACE_BYTES = 512 * 1024 * 1024;
/** In the verifier's own /tmp (emptied before the tests; beside the agent, a /tmp the agent never sees). */
export const VERIFIER_PYCACHE = '/tmp/.rollout-verifier-pycache';

/**
 * Empties what the agent could have planted outside the workspace before the
 * tests arrive. The agent is root without capabilities, so it can lock its
 * own files (chmod 555 on a directory keeps a planted file from being
 * deleted) and can put a link where /logs/verifier was (a link to a locked
 * directory of read-only reward files survives `find -delete` and makes
 * test.sh's write of the real reward fail). Everything is unlocked first
 * (chmod -R never follows a link), /logs/verifier is removed whatever it is,
 * and a fresh directory takes its place. A task's own image (the Kubernetes
 * provider runs it as it is) may have no /tests, /logs or /root: they are made.
 */
export const RESET_FOR_TESTS =
  'mkdir -p /tests /logs /root /tmp && chmod -R u+rwX /tests /logs /root /tmp 2>/dev/null; rm -rf /logs/verifier && find /tests /root /tmp -mindepth 1 -delete && mkdir /logs/verifier';

/** A read of what the pipeline trusts: never through a program of the sandbox's root (the agent's /usr/bin/cat). */
function readTrusted(provider: SandboxProvider, handle: SandboxHandle, path: string, maxBytes: number): Promise<Uint8Array> {
  return provider.readTrusted ? provider.readTrusted(handle, path, { maxBytes }) : provider.readFile(handle, path, { maxBytes });
}

async function readOptional(provider: SandboxProvider, handle: SandboxHandle, path: string, maxBytes: number): Promise<string | undefined> {
  try {
    return Buffer.from(await readTrusted(provider, handle, path, maxBytes)).toString('utf8');
  } catch (err) {
    if (err instanceof Error && /No such file or directory/.test(err.message)) return undefined;
    throw new ClassifiedError('infra', 'verifier_crashed', `could not read ${path}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}

/** Harbor's rule: reward.json (named rewards) wins over reward.txt; an empty or malformed one is a crash, never a zero. */
async function readReward(provider: SandboxProvider, handle: SandboxHandle): Promise<Reward | undefined> {
  const json = await readOptional(provider, handle, '/logs/verifier/reward.json', 1024 * 1024);
  if (json !== undefined) return parseRewardJson(json);
  const txt = await readOptional(provider, handle, '/logs/verifier/reward.txt', 4096);
  if (txt !== undefined) return parseRewardTxt(txt);
  return undefined;
}

/** What the verifier's commands get besides the task's [verifier].env: an image's offline toolchain (uv, wheels). */
export interface VerifyOptions {
  env?: Record<string, string>;
  /**
   * Where the sandbox sees its image's root filesystem read-only, for an image sandbox: /root and /tmp
   * are then put back as the image had them (a shell's rc files, a tool's config) instead of left empty.
   */
  imageRoot?: string;
}

/** RESET_FOR_TESTS, then the image's own /root and /tmp back where an image sandbox has them. */
export function resetForTests(imageRoot: string | undefined): string {
  if (!imageRoot) return RESET_FOR_TESTS;
  const restore = ['root', 'tmp'].map((d) => `{ [ ! -d ${shellQuote(`${imageRoot}/${d}`)} ] || cp -a ${shellQuote(`${imageRoot}/${d}`)}/. /${d}/; }`).join(' && ');
  return `${RESET_FOR_TESTS} && ${restore}`;
}

async function runTests(provider: SandboxProvider, handle: SandboxHandle, task: LoadedTask, mode: VerifyMode, options: VerifyOptions): Promise<VerifyOutcome> {
  // Whatever the agent left in /tests, /logs/verifier (a fake reward), /root or /tmp (a sitecustomize.py,
  // a shell rc file) is gone before the tests arrive. The workspace is what is being judged; it stays.
  const reset = await provider.exec(handle, resetForTests(options.imageRoot), { timeoutMs: 60_000 });
  if (reset.exitCode !== 0) throw new ClassifiedError('infra', 'verifier_crashed', `could not prepare /logs/verifier and /tests: ${reset.stderr.trim()}`);
  await uploadDirectory(provider, handle, task.testsDir, '/tests');
  const run = await provider.exec(handle, 'bash /tests/test.sh', {
    timeoutMs: task.verifierTimeoutSec * 1000,
    // Bytecode of the verifier's own: a .pyc the agent forged in a __pycache__ is never loaded, and the
    // tests' Pythons write none into the agent's root.
    env: { PYTHONPYCACHEPREFIX: VERIFIER_PYCACHE, ...options.env, ...task.config.verifier.env },
    cwd: handle.workdir,
    maxOutputBytes: 64 * 1024,
  });
  // stderr first: the test runner's summary (pytest's short test summary) is on stdout, and its end is what tells why.
  const outputTail = `${run.stderr.trim().split('\n').slice(-8).join('\n')}\n${run.stdout.trim().split('\n').slice(-20).join('\n')}`.trim();
  if (run.timedOut) {
    throw new ClassifiedError(
      'infra',
      'verifier_timeout',
      `tests/test.sh of ${task.id} ran past its ${task.verifierTimeoutSec} s timeout ([verifier].timeout_sec); last output: ${outputTail.slice(-500)}`,
    );
  }
  const reward = await readReward(provider, handle);
  if (!reward) {
    throw new ClassifiedError(
      'infra',
      'verifier_crashed',
      `tests/test.sh of ${task.id} exited ${run.exitCode} without writing /logs/verifier/reward.txt or reward.json; last output: ${outputTail.slice(-500)}`,
    );
  }
  return { ...reward, exitCode: run.exitCode, durationMs: run.durationMs, outputTail, mode };
}

/**
 * Stops what the agent left running: from outside first where the provider
 * can (a fork bomb at the pids limit leaves no room to start a killer inside,
 * and ending as an infra failure would let a policy dodge a low reward), then
 * from inside.
 */
async function stopAgent(provider: SandboxProvider, handle: SandboxHandle): Promise<void> {
  if (provider.stopProcesses) await provider.stopProcesses(handle);
  await provider.exec(handle, STOP_AGENT_PROCESSES, { timeoutMs: 30_000 });
}

/**
 * Refuses to trust a verification the agent could have forged through its filesystem: what it
 * replaced, removed or planted among the programs, libraries and startup hooks of the image that the
 * verifier's processes load (provider.tamperEvidence; docs/verifier-integrity.md) is the model's
 * doing, scored as a failed attempt with the findings as evidence. What it changes can never be undone
 * in the writable layer, so the check after the tests sees whatever was done before or during them.
 */
async function refuseTampering(provider: SandboxProvider, handle: SandboxHandle, when: string): Promise<void> {
  const findings = provider.tamperEvidence ? await provider.tamperEvidence(handle) : [];
  if (findings.length === 0) return;
  throw new ClassifiedError(
    'model',
    'verifier_tampered',
    `the agent changed what the verifier runs (found ${when}): ${findings[0]}${findings.length > 1 ? ` and ${findings.length - 1} more` : ''}`,
    { evidence: findings },
  );
}

export async function verifyInPlace(provider: SandboxProvider, handle: SandboxHandle, task: LoadedTask, options: VerifyOptions = {}): Promise<VerifyOutcome> {
  await refuseTampering(provider, handle, 'before the tests');
  // Processes the agent left running (a service the tests call) could change the image's files while
  // the tests run: then the layer is checked again after them. Without any, what the tests themselves
  // install (an apt package, a pip upgrade) is theirs and not checked.
  const lingering = provider.tamperEvidence && provider.lingeringProcesses ? await provider.lingeringProcesses(handle) : 0;
  if (!provider.provisionBeside) {
    await stopAgent(provider, handle);
    // Every process the agent left was stopped first: nothing of the agent's can change the files during the tests.
    return runTests(provider, handle, task, 'in-place', options);
  }
  let beside: SandboxHandle;
  try {
    ({ handle: beside } = await provider.provisionBeside(handle, { labels: { purpose: 'verifier' } }));
  } catch (err) {
    // The verifier's sandbox shares the agent's root: what the agent did to its files can keep it from
    // starting (its working directory made unreadable). That is a verifier that could not run, which
    // failure attribution decides with the control on the untouched start, never a masked provision failure.
    if (err instanceof ClassifiedError && err.failureClass === 'infra' && err.type === 'provision_failed') {
      throw new ClassifiedError('infra', 'verifier_crashed', `the verifier's sandbox beside the agent's could not start: ${err.message}`, { cause: err });
    }
    throw err;
  }
  try {
    const outcome = await runTests(provider, beside, task, 'in-place', options);
    if (lingering > 0) await refuseTampering(provider, handle, `after the tests, with ${lingering} process${lingering === 1 ? '' : 'es'} the agent left running`);
    return outcome;
  } finally {
    await provider.teardown(beside);
  }
}

/**
 * Archives the workspace. tar runs as root without capabilities, so it can
 * neither read an entry its owner cannot read nor, extracting, create entries
 * in a directory it has just made read-only (a Go module cache, or an agent
 * locking a planted file in). Entries short of u+rw (directories u+rwx) are
 * unlocked first, parents before children, and their modes recorded in
 * `modes` for the clean room to put back. The archive goes to /tmp, emptied
 * and unlocked first: nothing in it travels, and an agent may have locked or
 * filled it.
 */
const packWorkspace = (workdir: string, archive: string, modes: string): string =>
  `chmod -R u+rwX /tmp 2>/dev/null; find /tmp -mindepth 1 -delete && cd -- ${shellQuote(workdir)} && find . ! -type l \\( -type d ! -perm -u=rwx -o ! -type d ! -perm -u=rw \\) -printf '%m %p\\0' -exec chmod u+rwX {} \\; > ${modes} && tar -cf ${archive} .`;

/** Replaces the clean room's workspace with the archive and restores the recorded modes, children before parents. */
const unpackWorkspace = (workdir: string, archive: string, modes: string): string =>
  `find ${shellQuote(workdir)} -type d ! -perm -u=rwx -exec chmod u+rwx {} \\; && find ${shellQuote(workdir)} -mindepth 1 -delete && tar -C ${shellQuote(workdir)} -xf ${archive} && rm -f ${archive} && ` +
  `cd -- ${shellQuote(workdir)} && mapfile -d '' -t locked < ${modes} && for ((i = \${#locked[@]} - 1; i >= 0; i--)); do chmod -- "\${locked[i]%% *}" "\${locked[i]#* }" || exit; done && rm -f ${modes}`;

/** Verifies as `mode` says: in the agent's sandbox (beside it where the provider can) or in a clean room made from `spec`. */
export function verifyByMode(mode: VerifyMode, provider: SandboxProvider, handle: SandboxHandle, task: LoadedTask, spec: SandboxSpec, options: VerifyOptions = {}): Promise<VerifyOutcome> {
  return mode === 'clean-room' ? verifyCleanRoom(provider, handle, task, spec, options) : verifyInPlace(provider, handle, task, options);
}

export async function verifyCleanRoom(provider: SandboxProvider, handle: SandboxHandle, task: LoadedTask, spec: SandboxSpec, options: VerifyOptions = {}): Promise<VerifyOutcome> {
  await stopAgent(provider, handle);
  const archive = `/tmp/.rollout-workspace-${randomBytes(6).toString('hex')}.tar`;
  const modes = `${archive}.modes`;
  const pack = await provider.exec(handle, packWorkspace(handle.workdir, archive, modes), { timeoutMs: 120_000 });
  if (pack.exitCode !== 0) throw new ClassifiedError('infra', 'verifier_crashed', `could not archive the workspace ${handle.workdir}: ${pack.stderr.trim()}`);
  const workspace = await readTrusted(provider, handle, archive, MAX_WORKSPACE_BYTES);
  const lockedModes = await readTrusted(provider, handle, modes, MAX_WORKSPACE_BYTES);

  const { handle: room } = await provider.provision({ ...spec, labels: { ...spec.labels, purpose: 'clean-room-verify' } });
  try {
    await provider.writeFile(room, archive, workspace);
    await provider.writeFile(room, modes, lockedModes);
    const unpack = await provider.exec(room, unpackWorkspace(handle.workdir, archive, modes), { timeoutMs: 120_000 });
    if (unpack.exitCode !== 0) throw new ClassifiedError('infra', 'verifier_crashed', `could not unpack the workspace in the clean room: ${unpack.stderr.trim()}`);
    return await runTests(provider, room, task, 'clean-room', options);
  } finally {
    await provider.teardown(room);
  }
}
