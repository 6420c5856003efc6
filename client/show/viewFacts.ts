/** The short phrases both renderers use: outcome, reward, durations, attempt titles, the rollout's key facts. */
import type { AttemptView, RolloutView } from './rolloutView.js';
import { describeNetwork } from '../../tasks/taskNetwork.js';

export function durationText(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${(ms / 60_000).toFixed(1)} min`;
}

/** `ok/submitted`, `infra/sandbox_lost`, `stage agent, attempt 2, turn 3`, `terminated without a result`. */
export function outcomeText(view: RolloutView): string {
  const { state } = view;
  if (state.result) return `${state.result.outcomeClass}/${state.result.outcomeType}`;
  if (state.status === 'running') {
    const p = state.progress;
    if (!p) return 'no progress (no worker answered the progress query)';
    return `stage ${p.stage}, attempt ${p.attempt + 1}, turn ${p.turn}${p.lastAction ? ` (last: ${p.lastAction})` : ''}`;
  }
  return `${state.status} without a result`;
}

export function rewardText(view: RolloutView): string {
  const { state } = view;
  if (state.result) return state.result.reward === null ? 'no reward' : `reward ${state.result.reward}`;
  if (state.status === 'running') return state.progress?.reward != null ? `reward so far ${state.progress.reward}` : 'no reward yet';
  return 'no reward';
}

export function headlineFacts(view: RolloutView): string[] {
  const { state } = view;
  const r = state.result;
  const lines: string[] = [];
  const e = r?.experiment;
  const policy = e
    ? e.policy.kind === 'scripted'
      ? `scripted:${e.policy.script}`
      : e.policy.kind === 'harness'
        ? `${e.policy.harness} on ${e.policy.inference.model} at ${e.policy.inference.baseUrl}`
        : `${e.policy.model} at ${e.policy.baseUrl}`
    : undefined;
  lines.push(
    [
      `task ${state.taskId}`,
      e ? `version ${e.taskVersion.slice(0, 12)}` : undefined,
      policy ? `policy ${policy}` : undefined,
      e ? `verify ${e.verifyMode}` : undefined,
      e?.resume === 'replay' ? 'resume by replay' : undefined,
      e?.workerBuild ? `build ${e.workerBuild.deploymentName}/${e.workerBuild.buildId}` : undefined,
    ]
      .filter(Boolean)
      .join(' · '),
  );
  if (e?.network) lines.push(`network ${describeNetwork(e.network)}`);
  if (r) {
    const advantage =
      state.advantage === undefined
        ? 'advantage: group not finished'
        : state.advantage === null
          ? 'no advantage (excluded from the baseline)'
          : `advantage ${state.advantage.toFixed(3)}`;
    lines.push(`${r.valid ? 'valid' : 'not valid (outside the group baseline)'} · ${advantage} · ${r.attempts} attempt${r.attempts === 1 ? '' : 's'} · ${r.turns} turn${r.turns === 1 ? '' : 's'}`);
    if (r.branch)
      lines.push(
        `branch of ${r.branch.parentRolloutId} at turn ${r.branch.atTurn}: ${r.branch.sharedTurns > 0 ? `shares its turns 0-${r.branch.sharedTurns - 1}` : 'shares no turn (replaying them diverged; it started afresh)'}`,
      );
  }
  if (state.closeReason) lines.push(`closed: ${state.closeReason}`);
  if (state.startTime) lines.push(`started ${state.startTime.toISOString()}${state.closeTime ? `, closed ${state.closeTime.toISOString()}` : ''}`);
  return lines;
}

export function stageTimings(view: RolloutView): string | undefined {
  const t = view.state.result?.timings;
  if (!t) return undefined;
  return `queue ${durationText(t.queueMs)} · provision ${durationText(t.provisionMs)} · agent ${durationText(t.agentMs)} · verify ${durationText(t.verifyMs)} · teardown ${durationText(t.teardownMs)}`;
}

/** `attempt 1 of 2 · infra/sandbox_lost · no reward · 2 turns`, `attempt 2 of 2 · running`. */
export function attemptTitle(a: AttemptView, total: number): string {
  const head = `attempt ${a.attempt + 1} of ${total}`;
  if (a.running) return `${head} · running`;
  const s = a.summary;
  if (!s) return `${head} · ended (how: not reported by Temporal)`;
  return `${head} · ${s.outcomeClass}/${s.outcomeType} · ${s.reward === null ? 'no reward' : `reward ${s.reward}`} · ${s.turns} turn${s.turns === 1 ? '' : 's'}`;
}

/** What an attempt's message is: the operator's reason for a cancel, else the evidence of its failure. */
export function messageLabel(a: AttemptView): string {
  return a.summary?.outcomeClass === 'cancelled' ? 'reason' : 'evidence';
}

/** How the attempt began when it did not begin at turn 0 with nothing before it: turns taken over, or a replay refused. */
export function resumeFact(a: AttemptView): string | undefined {
  const r = a.summary?.resumed;
  if (r) {
    const checked = r.stateChecked ? "each call's exit code and the sandbox's files checked" : 'exit codes checked (this provider makes no state digest)';
    const drift = r.drift > 0 ? `; ${r.drift} output${r.drift === 1 ? '' : 's'} differed in text only` : '';
    const next = r.nextTurnAnswered ? `; turn ${r.turns}'s answer taken over too` : '';
    const source = r.fromRollout ? `its parent ${r.fromRollout} (attempt ${r.fromAttempt + 1})` : `attempt ${r.fromAttempt + 1}`;
    return `${r.fromRollout ? 'branched' : 'resumed'} at turn ${r.turns}: turns 0-${r.turns - 1} taken over from ${source}, restored by replaying ${r.replayedCalls} tool call${r.replayedCalls === 1 ? '' : 's'} in ${durationText(r.replayMs)} (${checked}${drift})${next}`;
  }
  const d = a.summary?.divergence;
  if (d)
    return `${d.fromRollout ? 'branch prefix refused' : 'resume refused'}: the replay of ${d.fromRollout ? `${d.fromRollout} (attempt ${d.fromAttempt + 1})` : `attempt ${d.fromAttempt + 1}`} diverged at turn ${d.turn}, call ${d.callIndex} (${d.what}); started at turn 0 on a fresh sandbox`;
  return undefined;
}
