/**
 * Failure attribution: an attempt is recorded infra only with evidence that
 * the infrastructure failed (docs/failure-attribution.md). Two kinds of end
 * look like infrastructure but may be the agent's doing:
 *
 * - the verifier crashed or timed out: the control (the same verifier on the
 *   untouched start, in a fresh sandbox on this host) decides. It completes
 *   -> the state the agent left broke verification: model/verifier_blocked
 *   (timeout) or model/verifier_broken (crash). It fails too, or the host
 *   cannot provision and exec -> infra, with that evidence.
 * - the sandbox died while the agent's own command ran: how it died decides.
 *   Torn down by the host -> infra. Its own memory limit's OOM killer ->
 *   model/memory_exhausted. Its init killed by a signal (only the host can
 *   do that) -> infra. Its init exited on its own -> model/sandbox_killed.
 *   Nothing known -> infra.
 *
 * Every decision carries its evidence (strings for the attempt history, the
 * trajectory and the Temporal UI).
 */
import { ClassifiedError, failureName } from '../../shared/failures.js';
import type { SandboxHandle, SandboxProvider, SandboxSpec } from '../../shared/sandbox.js';
import type { LoadedTask } from '../../shared/task.js';
import type { VerifyOptions } from '../runVerifier.js';
import type { ControlEvidence, VerifierControls } from './verifierControl.js';

function describeControl(e: ControlEvidence): string {
  const age = e.cached ? `cached, run ${Math.round((Date.now() - e.control.ranAt) / 1000)} s ago on this host` : 'run now on this host';
  return `control (the task's verifier on the untouched start in a fresh sandbox, ${age}): ${e.control.completed ? 'completed' : 'failed'}: ${e.control.detail.slice(0, 400)}`;
}

/** Attributes a verifier crash or timeout; any other error is returned unchanged. */
/** `options`: what the verifier needs on this task's environment (an image's toolchain), for the control as for the attempt. */
export async function attributeVerifyFailure(err: unknown, task: LoadedTask, controls: VerifierControls, controlSpec: SandboxSpec, options: VerifyOptions = {}): Promise<unknown> {
  if (!(err instanceof ClassifiedError) || err.failureClass !== 'infra') return err;
  const failed: string = failureName(err);
  const infraType = (['verifier_timeout', 'verifier_crashed'] as const).find((type) => failureName({ failureClass: 'infra', type }) === failed);
  if (!infraType) return err;
  const seen = `on the attempt's final state: ${infraType === 'verifier_timeout' ? 'the verifier timed out' : 'the verifier crashed'}`;
  let evidence: ControlEvidence;
  try {
    evidence = await controls.evidence(task, controlSpec, options);
  } catch (e) {
    const health = `host health: cannot provision a fresh sandbox for the control now: ${e instanceof Error ? e.message : String(e)}`;
    return new ClassifiedError('infra', infraType, err.message, { cause: err, evidence: [seen, health] });
  }
  const lines = [seen, describeControl(evidence), ...(evidence.probe ? [`host health: ${evidence.probe.detail}`] : [])];
  if (!evidence.control.completed) {
    return new ClassifiedError('infra', infraType, `${err.message} [the verifier fails on the untouched start too: broken for every state]`, { cause: err, evidence: lines });
  }
  if (evidence.probe && !evidence.probe.ok) {
    return new ClassifiedError('infra', infraType, `${err.message} [the host cannot provision and exec now]`, { cause: err, evidence: lines });
  }
  const type = infraType === 'verifier_timeout' ? 'verifier_blocked' : 'verifier_broken';
  return new ClassifiedError(
    'model',
    type,
    `${err.message} [attributed to the agent: the state it left made verification impossible; the control, the same verifier on the untouched start, ${evidence.control.detail}]`,
    {
      cause: err,
      evidence: lines,
    },
  );
}

/** Attributes a sandbox found gone after the agent's own command; any other error is returned unchanged. */
export async function attributeSandboxLoss(err: unknown, provider: SandboxProvider, handle: SandboxHandle, command: string): Promise<unknown> {
  if (!(err instanceof ClassifiedError) || err.failureClass !== 'infra' || err.type !== 'sandbox_lost' || !provider.lossEvidence) return err;
  const loss = await provider.lossEvidence(handle).catch(() => undefined);
  const during = `the sandbox died while the agent's command ran: ${command.slice(0, 200)}`;
  if (!loss) return new ClassifiedError('infra', 'sandbox_lost', err.message, { cause: err, evidence: [during, 'no evidence of how it died could be read on the host'] });
  const facts = [
    during,
    `record on the host: ${loss.tornDownByHost ? 'gone (torn down by the host: a teardown or the reaper)' : 'present (the host did not tear it down)'}`,
    `OOM kills by its memory limit: ${loss.oomKills ?? 'unknown'}`,
    `its init: ${loss.initEnd === null ? 'end unknown' : loss.initEnd.kind === 'signal' ? `killed by ${loss.initEnd.signal} (only the host can: the kernel drops it from inside)` : `exited on its own with status ${loss.initEnd.status}`}`,
  ];
  if (loss.tornDownByHost) return new ClassifiedError('infra', 'sandbox_lost', err.message, { cause: err, evidence: facts });
  // Before the signal rule: the OOM killer ends an init with SIGKILL too.
  if (loss.oomKills !== null && loss.oomKills > 0) {
    return new ClassifiedError('model', 'memory_exhausted', `${err.message} [attributed to the agent: its command ran the sandbox out of its own memory limit]`, { cause: err, evidence: facts });
  }
  if (loss.initEnd?.kind === 'signal') return new ClassifiedError('infra', 'sandbox_lost', err.message, { cause: err, evidence: facts });
  if (loss.initEnd?.kind === 'exit') {
    return new ClassifiedError(
      'model',
      'sandbox_killed',
      `${err.message} [attributed to the agent: the sandbox's init ended from inside while the agent's command ran, with no host-side cause]`,
      { cause: err, evidence: facts },
    );
  }
  return new ClassifiedError('infra', 'sandbox_lost', err.message, { cause: err, evidence: facts });
}
