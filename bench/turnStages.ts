/**
 * The pipeline's own time per turn, split by stage, from the clocks the policy and tool steps keep in
 * their trajectory records (agent/conversation.ts StepClock). Between the model call of
 * turn k and the model call of turn k+1 the time is:
 *   policy prep      the policy step began until its model call began (task check, conversation
 *                    rebuild, token bookkeeping), less any admission wait (the server's, not ours)
 *   policy -> tools  the model call ended until the first tool step began (record write, activity
 *                    completion, workflow task or local activity dispatch, tool step dispatch)
 *   tool prep        each tool step began until its command began (trajectory reads)
 *   tools            the commands in the sandbox (not the pipeline's)
 *   tools -> policy  the last command ended until the next policy step began
 * Every stage is the same worker's clock on one host for a local run; across hosts it carries their skew.
 */
import type { TrajectoryAttempt } from '../client/loadTrajectory.js';

export const OWN_STAGES = ['policyToTools', 'toolPrep', 'betweenTools', 'toolsToPolicy', 'policyPrep'] as const;
export type OwnStage = (typeof OWN_STAGES)[number];

export interface TurnStages {
  /** ms per stage of the pipeline's own time. */
  own: Record<OwnStage, number>;
  /** Their sum. */
  ownMs: number;
  modelMs: number;
  toolMs: number;
  /** From this turn's model call to the next turn's. */
  wallMs: number;
}

/** One entry per turn that ran tool calls and was followed by another turn with clocks. */
export function turnStages(attempts: TrajectoryAttempt[]): TurnStages[] {
  const out: TurnStages[] = [];
  for (const a of attempts) {
    for (const [i, turn] of a.turns.entries()) {
      const next = a.turns[i + 1];
      const p = turn.policy.clock;
      const q = next?.policy.clock;
      const tools = turn.tools.filter((t) => t.clock !== undefined);
      if (!p || !q || tools.length === 0 || tools.length !== turn.tools.length) continue;
      const clocks = tools.map((t) => t.clock).filter((c) => c !== undefined);
      const first = clocks.reduce((m, c) => (c.stepStartedAt < m.stepStartedAt ? c : m));
      const last = clocks.reduce((m, c) => (c.callEndedAt > m.callEndedAt ? c : m));
      const waited = next?.policy.admission?.waitedMs ?? 0;
      const modelMs = p.callEndedAt - p.callStartedAt;
      const toolMs = clocks.reduce((s, c) => s + (c.callEndedAt - c.callStartedAt), 0);
      const wallMs = q.callStartedAt - p.callStartedAt;
      const ownMs = Math.max(0, wallMs - modelMs - toolMs - waited);
      const policyToTools = Math.max(0, first.stepStartedAt - p.callEndedAt);
      const toolPrep = clocks.reduce((s, c) => s + Math.max(0, c.callStartedAt - c.stepStartedAt), 0);
      const toolsToPolicy = Math.max(0, q.stepStartedAt - last.callEndedAt);
      const policyPrep = Math.max(0, q.callStartedAt - q.stepStartedAt - waited);
      const own: Record<OwnStage, number> = { policyToTools, toolPrep, betweenTools: Math.max(0, ownMs - policyToTools - toolPrep - toolsToPolicy - policyPrep), toolsToPolicy, policyPrep };
      out.push({ own, ownMs, modelMs, toolMs, wallMs });
    }
  }
  return out;
}
