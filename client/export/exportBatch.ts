/**
 * `rollout export` from TypeScript: the training samples of a batch's finished
 * groups, one per valid rollout, from the group results (reward, advantage,
 * outcome) and the trajectory store (token ids of the attempt that produced
 * the result). Rollouts whose token integrity broke or that lack ids are left
 * out unless asked for, and every one left out is counted with why.
 */
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import type { Client } from '@temporalio/client';
import type { TrajectoryStore } from '../../stores/trajectoryStore.js';
import type { PolicyTurnRecord } from '../../agent/conversation.js';
import type { GroupResult, RolloutResult } from '../../shared/pipeline.js';
import type { TokenIntegrity, TurnTokens } from '../../shared/tokens.js';
import { listBatchGroups } from '../batchGroups.js';
import { loadTrajectory } from '../loadTrajectory.js';
import { assembleTokens, segmentRanges, type TrainingSample } from './trainingSample.js';

export interface ExportOptions {
  /** Keep rollouts whose prefix broke (their broken turns unmasked) or that lack token ids (empty arrays). */
  keepBroken?: boolean;
  /**
   * Keep rollouts a turn of which has logprobs that are not its sampling distribution's (greedy, raw
   * logprobs of a reshaped distribution, a grammar): for a trainer that recomputes logprobs itself.
   * Each carries `logprob_mismatch`.
   */
  keepMismatchedLogprobs?: boolean;
}

export interface ExcludedRollout {
  rollout_id: string;
  why: 'not_valid' | 'broken' | 'missing' | 'logprobs';
  reason: string;
}

export interface ExportReport {
  batchId: string;
  groups: number;
  unfinishedGroups: number;
  exported: number;
  /** Kept on request although their integrity is not ok. */
  keptBroken: number;
  /** Kept on request although a turn's logprobs are not its sampling distribution's. */
  keptMismatched: number;
  excluded: ExcludedRollout[];
}

function integrityOf(r: RolloutResult, records: PolicyTurnRecord[]): TokenIntegrity {
  if (r.tokenIntegrity) return r.tokenIntegrity;
  return { status: 'missing', attempt: r.attempts - 1, turns: records.length, reason: 'the rollout ran before token capture existed' };
}

/** Tokens a branch shares with its parent: the prompt of its first own turn (every shared turn and observation, and the template's turn header). */
function sharedPrefixLength(records: PolicyTurnRecord[], sharedTurns: number): number {
  if (sharedTurns === 0) return 0;
  const first = records[sharedTurns]?.turnTokens;
  return first && 'promptIds' in first ? first.promptIds.length : 0;
}

/** The rollout's samples: one, or one per training segment when a harness rewrote its history (token_integrity.segmentStarts). */
async function samplesOf(store: TrajectoryStore, group: GroupResult, r: RolloutResult): Promise<{ samples: TrainingSample[]; integrity: TokenIntegrity }> {
  const attempts = await loadTrajectory(store, r.trajectoryRef);
  const wanted = r.tokenIntegrity?.attempt ?? attempts.length - 1;
  const records = attempts.find((a) => a.attempt === wanted)?.turns.map((t) => t.policy) ?? [];
  const integrity = integrityOf(r, records);
  const versions = r.policyVersions ?? records.map((p) => p.policyVersion ?? 0);
  const ranges = integrity.status === 'missing' ? [[0, records.length] as [number, number]] : segmentRanges(records.length, integrity.segmentStarts);
  const samples = ranges.map(([first, end], segment): TrainingSample => {
    const inSegment = records.slice(first, end);
    const withIds = integrity.status === 'missing' ? [] : inSegment.map((p) => p.turnTokens).filter((t): t is TurnTokens => t !== undefined && 'promptIds' in t);
    const tokens = assembleTokens(withIds);
    const unmasked = tokens.unmasked_turns.map((k) => k + first);
    return {
      rollout_id: r.workflowId,
      group_id: group.workflowId,
      batch_id: group.batchId,
      task_id: group.taskId,
      task_version: group.taskVersion,
      rollout_index: r.index,
      input_ids: tokens.input_ids,
      loss_mask: tokens.loss_mask,
      logprobs: tokens.logprobs,
      temperatures: tokens.temperatures,
      // "turn k" in the rollout's numbering, not the segment's.
      logprob_mismatch: tokens.logprob_mismatch?.replace(/^turn (\d+)/, (_m, k: string) => `turn ${Number(k) + first}`) ?? null,
      reward: r.reward,
      advantage: r.advantage,
      policy_versions: ranges.length > 1 ? versions.slice(first, end) : versions,
      completion_spans: tokens.completion_spans,
      outcome: { class: r.outcomeClass, type: r.outcomeType },
      token_integrity: { ...integrity, ...(unmasked.length > 0 ? { unmasked_turns: unmasked } : {}) },
      staleness: r.staleness ?? null,
      stale: r.stale ?? false,
      parent_rollout_id: r.branch?.parentRolloutId ?? null,
      branch_turn: r.branch?.atTurn ?? null,
      prefix_length: r.branch ? sharedPrefixLength(records, r.branch.sharedTurns) : null,
      sibling_advantages: (r.siblingAdvantages ?? []).map((s) => ({ parent_rollout_id: s.parentRolloutId, branch_turn: s.atTurn, advantage: s.advantage })),
      segment,
      segments: ranges.length,
      segment_turns: [first, end],
    };
  });
  return { samples, integrity };
}

/** Samples of one group's rollouts, and those left out. */
export async function groupSamples(
  store: TrajectoryStore,
  group: GroupResult,
  options: ExportOptions = {},
): Promise<{ samples: TrainingSample[]; excluded: ExcludedRollout[]; keptBroken: number; keptMismatched: number }> {
  const samples: TrainingSample[] = [];
  const excluded: ExcludedRollout[] = [];
  let keptBroken = 0;
  let keptMismatched = 0;
  for (const r of group.rollouts) {
    if (!r.valid || r.reward === null) {
      excluded.push({ rollout_id: r.workflowId, why: 'not_valid', reason: `${r.outcomeClass}/${r.outcomeType}${group.status === 'stale' ? ` (group dropped: ${group.statusReason})` : ''}` });
      continue;
    }
    const { samples: ofRollout, integrity } = await samplesOf(store, group, r);
    if (integrity.status !== 'ok') {
      const why = integrity.status;
      const where = integrity.turn !== undefined ? ` at turn ${integrity.turn}${integrity.position !== undefined ? `, token ${integrity.position}` : ''}` : '';
      if (!options.keepBroken) {
        excluded.push({ rollout_id: r.workflowId, why, reason: `${why}${where}: ${integrity.reason ?? ''}` });
        continue;
      }
      keptBroken++;
    }
    const mismatch = ofRollout.find((s) => s.logprob_mismatch !== null)?.logprob_mismatch ?? null;
    if (mismatch !== null && integrity.status !== 'missing') {
      if (!options.keepMismatchedLogprobs) {
        excluded.push({ rollout_id: r.workflowId, why: 'logprobs', reason: `logprobs not of the sampling distribution at ${mismatch}` });
        continue;
      }
      keptMismatched++;
    }
    samples.push(...ofRollout);
  }
  return { samples, excluded, keptBroken, keptMismatched };
}

/** Writes the batch's samples as JSONL to `out` and reports what was exported and what was left out. */
export async function exportBatch(client: Client, store: TrajectoryStore, batchId: string, out: string, options: ExportOptions = {}): Promise<ExportReport> {
  const { finished, unfinished } = await listBatchGroups(client, batchId);
  const report: ExportReport = { batchId, groups: finished.length, unfinishedGroups: unfinished.length, exported: 0, keptBroken: 0, keptMismatched: 0, excluded: [] };
  const file = createWriteStream(out);
  try {
    for (const group of finished) {
      const { samples, excluded, keptBroken, keptMismatched } = await groupSamples(store, group, options);
      for (const s of samples) if (!file.write(`${JSON.stringify(s)}\n`)) await once(file, 'drain');
      report.exported += samples.length;
      report.keptBroken += keptBroken;
      report.keptMismatched += keptMismatched;
      report.excluded.push(...excluded);
    }
  } finally {
    file.end();
    await once(file, 'close');
  }
  return report;
}
