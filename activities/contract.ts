/**
 * What the workflows and the activities agree on: each activity's input and output. Workflow code
 * imports these as types only (lint enforces it); the activities that take and return them are in
 * activities/steps/, one file per concern, composed by createActivities.ts.
 */
import type { ExperimentRecord, ResolvedGroupInput, ResolvedPolicyConfig } from '../shared/pipeline.js';
import type { EnforcedLimits, SandboxHandle } from '../shared/sandbox.js';
import type { TaskRef } from '../shared/task.js';
import type { TurnTokenStatus } from '../policies/tokens/turnIntegrity.js';

export interface ProvisionInput {
  group: ResolvedGroupInput;
  workflowId: string;
  runId: string;
  index: number;
  attempt: number;
  trajectoryRef: string;
}

export interface ProvisionOutput {
  handle: SandboxHandle;
  hostQueue: string;
  enforcedLimits: EnforcedLimits;
  provisionMs: number;
  agentTimeoutSec: number;
  /** The task's [verifier].timeout_sec (absent from provisions recorded before it was returned). */
  verifierTimeoutSec?: number;
  workdir: string;
  experiment: ExperimentRecord;
}

export interface PolicyStepInput {
  policy: ResolvedPolicyConfig;
  task: TaskRef;
  trajectoryRef: string;
  rolloutIndex: number;
  attempt: number;
  turn: number;
  /** The policy version the endpoint serves now, recorded with the turn (absent from rollouts started before versions). */
  policyVersion?: number;
}

export interface PolicyStepOutput {
  calls: { name: string; summary: string; malformed: boolean }[];
  /** The policy called submit, or answered without any tool call. */
  submitted: boolean;
  latencyMs: number;
  /** The turn's token ids and the exact-prefix check, in short (the ids are in the store). */
  tokens?: TurnTokenStatus;
  /** The policy version the recorded answer was sampled under (absent from workers before it was returned). */
  policyVersion?: number;
  /** The answer was already recorded by an earlier try of this turn and is returned as it was. */
  reused?: boolean;
}

export interface ToolStepInput {
  handle: SandboxHandle;
  trajectoryRef: string;
  attempt: number;
  turn: number;
  callIndex: number;
  workdir: string;
  commandTimeoutSec: number;
  maxOutputBytes: number;
  remainingMs: number;
  /** Keep the digest of the sandbox's files after the call with its record (failurePolicy.resume 'replay'). */
  recordState?: boolean;
}

/** The tool calls of one turn (callIndexes into the policy's answer, in order) run as one activity. */
export interface ToolCallsStepInput extends Omit<ToolStepInput, 'callIndex'> {
  callIndexes: number[];
}

export interface ToolCallsStepOutput {
  /** One per call that ran, in order; fewer than asked when the agent's time budget ran out. */
  calls: ToolStepOutput[];
}

export interface ToolStepOutput {
  name: string;
  summary: string;
  exitCode: number | null;
  malformed: boolean;
  timedOut: boolean;
}

export interface VerifyInput {
  handle: SandboxHandle;
  group: ResolvedGroupInput;
  index: number;
  attempt: number;
  trajectoryRef: string;
}

export interface TeardownInput {
  handle: SandboxHandle;
  trajectoryRef: string;
  attempt: number;
}

export interface VerifyOutput {
  reward: number;
  metrics: Record<string, number>;
  mode: string;
  verifyMs: number;
}

/** verifyThenTeardown: the verdict, and the teardown that followed it (or why it did not happen: the workflow tears down then). */
export interface VerifyThenTeardownOutput extends VerifyOutput {
  teardown: { done: true; teardownMs: number } | { done: false; error: string };
}

// Engine types the workflows read: re-exported here so workflow code imports from this one module.
export type { TurnTokenStatus } from '../policies/tokens/turnIntegrity.js';
export type { RestoredPrefix } from '../resume/restoreTurns.js';
export type { ReapReport } from '../sandboxes/reaper/reapSandboxes.js';
