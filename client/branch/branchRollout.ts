/**
 * Branch a rollout at turn K: N new rollouts that share its turns 0..K-1 (each restores them into its
 * own fresh sandbox by replay and takes them over with their ids, resume/) and go on from
 * turn K with the policy, each with its own seed. They run as one group of a new batch
 * (`<batch>.b<index>t<K>-<stamp>`), so their results stream, export and get advantages as siblings.
 *
 * Checked before anything starts, each with an error that names the thing and the fix: a rollout
 * Temporal does not know, a turn past what its attempt finished, a trajectory the store no longer holds.
 */
import type { Client } from '@temporalio/client';
import { metaName } from '../../agent/conversation.js';
import { readRecordedTurns } from '../../resume/recordedTurns.js';
import type { TrajectoryStore } from '../../stores/trajectoryStore.js';
import { GroupInputSchema, MAX_GROUP_SIZE, type ResolvedGroupInput } from '../../shared/pipeline.js';
import { readRolloutState, ShowError } from '../show/readRolloutState.js';
import { RerunError, rolloutInputOf } from '../rerunRollout.js';
import { submitResolvedBatch, type SubmitOptions, type SubmittedBatch } from '../submitBatch.js';

export class BranchError extends Error {
  override readonly name = 'BranchError';
}

export interface BranchRequest {
  /** The parent rollout's workflow id (rollout/<batch>/<task>/<index>). */
  rolloutId: string;
  /** Turns 0..atTurn-1 are shared; each branch generates turn atTurn itself. */
  atTurn: number;
  /** How many branches. */
  n: number;
  /** The branches' batch id (default `<batch>.b<index>t<K>-<stamp>`). */
  batchId?: string;
}

export interface SubmittedBranches {
  batch: SubmittedBatch;
  parent: string;
  atTurn: number;
  /** The parent's attempt whose turns the branches share. */
  attempt: number;
}

/** Starts N branches of a rollout at a turn, after checking that the rollout, the turn and its trajectory are there. */
export async function branchRollout(client: Client, store: TrajectoryStore, request: BranchRequest, address: string, submit: SubmitOptions = {}): Promise<SubmittedBranches> {
  const { rolloutId, atTurn, n } = request;
  if (!Number.isInteger(atTurn) || atTurn < 1) throw new BranchError(`--at-turn ${atTurn}: give the turn the branches start at, a whole number from 1 (turns 0..K-1 are shared)`);
  if (!Number.isInteger(n) || n < 1 || n > MAX_GROUP_SIZE) throw new BranchError(`-n ${n}: give how many branches, a whole number from 1 to ${MAX_GROUP_SIZE}`);
  let state;
  try {
    state = await readRolloutState(client, rolloutId, address);
  } catch (err) {
    if (err instanceof ShowError) throw new BranchError(`cannot branch: ${err.message}`);
    throw err;
  }
  // The attempt that produced the result, or the one running now.
  const attempt = state.result ? state.result.attempts - 1 : (state.progress?.attempt ?? 0);
  const ref = state.trajectoryRef;
  if (!(await store.get(ref, metaName(attempt)))) {
    throw new BranchError(
      `the trajectory of ${rolloutId} (attempt ${attempt + 1}) is not in the trajectory store at ${store.locate(ref)}: nothing to share. Fix: point --data-dir or --store at the store its workers used (or the trajectory was removed: branch another rollout)`,
    );
  }
  const recorded = await readRecordedTurns(store, ref, attempt);
  const finished = recorded.finished.length;
  const submitted = recorded.finished.at(-1)?.submitted === true;
  // Branching at a turn that submitted shares the submit too: nothing would be left to sample.
  const last = submitted ? finished - 1 : finished;
  if (atTurn > last) {
    const what = finished === 0 ? 'no finished turn' : `${finished} finished turn${finished === 1 ? '' : 's'} (0-${finished - 1}${submitted ? `; turn ${finished - 1} submitted` : ''})`;
    throw new BranchError(
      `--at-turn ${atTurn} is past the end of ${rolloutId}: its attempt ${attempt + 1} has ${what}. Fix: ${last >= 1 ? `branch at a turn from 1 to ${last}` : 'branch a rollout that finished at least one turn before it submitted'}`,
    );
  }
  let input;
  try {
    input = await rolloutInputOf(client, rolloutId);
  } catch (err) {
    if (err instanceof RerunError) throw new BranchError(err.message);
    throw err;
  }
  const batchId = request.batchId ?? `${input.group.batchId}.b${input.index}t${atTurn}-${Date.now().toString(36)}`;
  const group: ResolvedGroupInput = GroupInputSchema.parse({
    ...input.group,
    batchId,
    groupSize: n,
    minValid: Math.min(input.group.minValid, n),
    policy: branchPolicy(input.group.policy, batchId),
    branchOf: { rolloutWorkflowId: rolloutId, trajectoryRef: ref, attempt, atTurn },
  });
  const batch = await submitResolvedBatch(client, [group], submit);
  return { batch, parent: rolloutId, atTurn, attempt };
}

/** The parent's policy with a seed of the branches' own (each branch's turns then draw from the rollout index, attempt and turn as usual). */
function branchPolicy(policy: ResolvedGroupInput['policy'], batchId: string): ResolvedGroupInput['policy'] {
  if (policy.kind !== 'openai' || policy.sampling.seed === undefined) return policy;
  return { ...policy, sampling: { ...policy.sampling, seed: (policy.sampling.seed + fnv1a(batchId)) % 2 ** 31 } };
}

function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}
