/**
 * Tree-shaped sampling (group.branching { atTurns, width }): a rollout that reaches a branch turn
 * starts width-1 branches there, as its child workflows (the Web UI shows them under it), each sharing
 * its turns so far (restored by replay, resume/) and going on on its own; branches branch
 * again at later turns. A rollout waits for its branches before it returns and hands their results
 * (and their branches') up with its own, so the group sees the whole tree.
 *
 * Rollout indexes stay unique and deterministic: with R roots, width w and L branch turns, a rollout
 * is root r with a path of L digits (digit j: which of the w continuations it took at branch turn j,
 * 0 = the one that started the branches); index = r + R * (the path read as a base-w number).
 */
import { getExternalWorkflowHandle, isCancellation, log, ParentClosePolicy, startChild, type ChildWorkflowHandle } from '@temporalio/workflow';
import { rolloutWorkflowId } from '../shared/names.js';
import type { RolloutInput, RolloutResult } from '../shared/pipeline.js';
import { ROLLOUT_BATCH, ROLLOUT_TASK_ID, ROLLOUT_TASK_VERSION } from '../shared/searchAttributes.js';
import { brokenRollout } from './brokenRollout.js';
import { policyVersionSignal } from './definitions.js';

/** The `rollout` workflow's signature, by its contract types (importing rollout.ts here would be a circle: it runs the branches). */
type RolloutWorkflow = (input: RolloutInput) => Promise<RolloutResult>;

/** The branch turn (1-based point j) a rollout at `index` started at: 0 for a root. */
export function branchLevel(input: Pick<RolloutInput, 'group' | 'index'>): number {
  const b = input.group.branching;
  if (!b) return 0;
  const path = Math.floor(input.index / input.group.groupSize);
  let level = 0;
  for (let j = 1; j <= b.atTurns.length; j++) if (Math.floor(path / b.width ** (b.atTurns.length - j)) % b.width !== 0) level = j;
  return level;
}

/** The indexes of the branches a rollout starts at branch point j (1-based). */
export function branchIndexes(input: Pick<RolloutInput, 'group' | 'index'>, j: number): number[] {
  const b = input.group.branching;
  if (!b) return [];
  const step = input.group.groupSize * b.width ** (b.atTurns.length - j);
  return Array.from({ length: b.width - 1 }, (_, c) => input.index + (c + 1) * step);
}

export class RolloutBranches {
  private readonly started = new Map<number, { handle: ChildWorkflowHandle<RolloutWorkflow>; turn: number }>();
  private readonly branchedAt = new Set<number>();
  private readonly level: number;

  constructor(
    private readonly input: RolloutInput,
    private readonly workflowId: string,
    private readonly trajectoryRef: string,
  ) {
    this.level = branchLevel(input);
  }

  /** Before turn `turn`'s policy call: starts this rollout's branches when the turn is one of its branch turns. */
  async beforeTurn(turn: number, attempt: number, policyVersion: number): Promise<void> {
    const b = this.input.group.branching;
    const j = b ? b.atTurns.indexOf(turn) + 1 : 0;
    // Once per branch turn (an attempt that starts again at turn 0 passes it again), and only at turns after its own.
    if (!b || j <= this.level || this.branchedAt.has(turn)) return;
    this.branchedAt.add(turn);
    const { group } = this.input;
    for (const index of branchIndexes(this.input, j)) {
      const child: RolloutInput = { group, index, policyVersion, branchOf: { rolloutWorkflowId: this.workflowId, trajectoryRef: this.trajectoryRef, attempt, atTurn: turn } };
      const handle = await startChild<RolloutWorkflow>('rollout', {
        workflowId: rolloutWorkflowId(group.batchId, group.task.id, index),
        taskQueue: group.taskQueues.main,
        args: [child],
        parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
        staticSummary: `branch of rollout ${this.input.index} at turn ${turn} · ${group.task.id} (rollout ${index})`,
        staticDetails: `**batch** ${group.batchId} · **task** ${group.task.id} · **rollout** ${index} · shares turns 0-${turn - 1} of ${this.workflowId}`,
        typedSearchAttributes: [
          { key: ROLLOUT_BATCH, value: group.batchId },
          { key: ROLLOUT_TASK_ID, value: group.task.id },
          { key: ROLLOUT_TASK_VERSION, value: group.task.version },
        ],
      });
      this.started.set(index, { handle, turn });
    }
  }

  /** Tells the running branches of a new policy version (they pass it on to theirs). */
  signalVersion(version: number): void {
    for (const { handle } of this.started.values()) {
      getExternalWorkflowHandle(handle.workflowId)
        .signal(policyVersionSignal, version)
        .catch((err: unknown) => log.info('branch finished before it heard of the new policy version', { branch: handle.workflowId, error: String(err) }));
    }
  }

  /** Every branch's result and its branches', in index order, each without its own list (the group gets one flat list). */
  async results(): Promise<RolloutResult[]> {
    const out: RolloutResult[] = [];
    for (const [index, { handle, turn }] of [...this.started].sort(([a], [b]) => a - b)) {
      let result: RolloutResult;
      try {
        result = await handle.result();
      } catch (err) {
        if (isCancellation(err)) throw err;
        const { batchId, task } = this.input.group;
        result = { ...brokenRollout({ batchId, taskId: task.id, index, workflowId: handle.workflowId }, err), branch: { parentRolloutId: this.workflowId, atTurn: turn, sharedTurns: 0 } };
      }
      const { branches, ...own } = result;
      out.push(own, ...(branches ?? []));
    }
    return out;
  }
}
