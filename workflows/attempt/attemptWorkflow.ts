/**
 * What a rollout hands the attempt workflow it starts on its sandbox's host (group.attemptOn
 * 'host'), and what comes back: the attempt's outcome, or a failure that carries its class and
 * what the attempt had done so far.
 */
import type { ProvisionOutput } from '../../activities/contract.js';
import type { RolloutInput, StageTimings } from '../../shared/pipeline.js';
import type { TokenIntegrity } from '../../shared/tokens.js';
import type { RestoredPrefix } from '../../activities/contract.js';
import type { AttemptOutcome } from './agentLoop.js';

export interface AttemptInput {
  group: RolloutInput['group'];
  index: number;
  attempt: number;
  trajectoryRef: string;
  sandbox: ProvisionOutput;
  /** The policy version when the attempt starts; the rollout signals later ones on (policyVersion). */
  policyVersion: number;
  /** Whether a staleness restart is still allowed (the rollout counts them). */
  mayRestartStale: boolean;
  /** The rollout this attempt belongs to (its workflow id), for logs and the Web UI. */
  rolloutWorkflowId: string;
  /** Turns the rollout restored into this attempt's sandbox (failurePolicy.resume 'replay'): the loop goes on after them. */
  resumed?: RestoredPrefix;
}

export type AttemptTimings = Pick<StageTimings, 'agentMs' | 'verifyMs' | 'teardownMs'>;

export interface AttemptResult {
  outcome: AttemptOutcome;
  timings: AttemptTimings;
  attemptVersions: number[];
  tokenIntegrity: TokenIntegrity;
}

/** details[0] of the ApplicationFailure an attempt workflow fails with. */
export interface AttemptFailureDetails {
  /** Failure attribution's findings, when it ran (classifyFailure reads them from here). */
  evidence?: string[];
  /** Turns the attempt had finished when it failed. */
  turns: number;
  /** Turns of an agent loop that had ended (0 when the failure came during the loop). */
  loopTurns: number;
  timings: AttemptTimings;
  attemptVersions: number[];
  tokenIntegrity: TokenIntegrity;
}

/** The failure type of an attempt that stopped to restart at a newer policy version. */
export const STALE_RESTART_FAILURE = 'attempt/stale_restart';

/** The attempt workflow's id: one per attempt of a rollout. */
export const attemptWorkflowId = (rolloutWorkflowId: string, attempt: number): string => `${rolloutWorkflowId}/attempt-${attempt}`;

export function isAttemptFailureDetails(value: unknown): value is AttemptFailureDetails {
  return typeof value === 'object' && value !== null && 'turns' in value && typeof value.turns === 'number' && 'attemptVersions' in value && Array.isArray(value.attemptVersions);
}
