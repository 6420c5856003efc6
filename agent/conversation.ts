/**
 * The conversation of one attempt, rebuilt from the trajectory store: the
 * system prompt and instruction, then per turn the policy's assistant message
 * and the observation of each of its tool calls.
 */
import type { SandboxStateDigest } from '../shared/sandbox.js';
import type { PrefixCheck } from '../shared/tokens.js';
import type { ChatMessage, ToolSchema } from '../shared/tools.js';
import type { PolicyResponse } from '../policies/policyClient.js';
import { attemptPrefix, turnName, type TrajectoryStore } from '../stores/trajectoryStore.js';
import type { Admission } from '../policies/admission/admissionGate.js';

export const SYSTEM_PROMPT =
  'You are an agent solving a task inside an isolated Linux environment with no network. ' +
  'Work with the tools: run commands with bash, read and write files. The workspace is your working directory. ' +
  'When the task is done, call submit. Your work is checked by tests you cannot see after you submit.';

export interface AttemptMeta {
  system: string;
  instruction: string;
  tools: readonly ToolSchema[];
  startedAt: string;
}

/** One turn of the policy as stored: its answer (with token data when the server returned it) and how long it took. */
/**
 * When a policy or tool step ran, in epoch ms on its worker's clock: the step's activity began, its
 * call (the model's HTTP request, the sandbox command) began and ended. What lies between one step's
 * call and the next step's call is the pipeline's own time (bench section 6 splits it by stage).
 */
export interface StepClock {
  stepStartedAt: number;
  callStartedAt: number;
  callEndedAt: number;
}

export interface PolicyTurnRecord extends PolicyResponse {
  turn: number;
  latencyMs: number;
  /** When the step and its model call ran (absent in records from before it was kept). */
  clock?: StepClock;
  /** The policy version that generated this turn (absent in records from before versions). */
  policyVersion?: number;
  /** This turn's prompt against the previous turn's prompt + completion ids; null when either has no ids. */
  prefixCheck?: PrefixCheck | null;
  /** How long the call waited for room on the inference server, and its load then (policies/admission/); not in latencyMs. */
  admission?: Admission;
  /** Taken over from an earlier attempt of the rollout (failurePolicy.resume 'replay'): the model was not asked again. */
  restored?: { fromAttempt: number; fromRollout?: string };
  /** A harness's call (policy kind harness): the conversation and tools it sent, and what it asked for that the group's sampling replaced. */
  harnessRequest?: { messages: ChatMessage[]; tools: ToolSchema[]; overridden?: Record<string, unknown> };
  /** A harness's call that starts a new training segment: the harness rewrote its history, so this prompt does not extend the previous turn's ids. */
  segmentStart?: string;
}

export interface ToolTurnRecord {
  turn: number;
  callIndex: number;
  toolCallId: string;
  name: string;
  arguments: string;
  /** The text the policy sees as the tool's answer. */
  observation: string;
  exitCode: number | null;
  timedOut: boolean;
  truncated: boolean;
  durationMs: number;
  /** True when the call could not be run as given (unknown tool, invalid JSON, missing field). */
  malformed: boolean;
  /** When the step and its command ran (absent in records from before it was kept). */
  clock?: StepClock;
  /** The digest of the sandbox's files after the call (failurePolicy.resume 'replay'): what a replay of it must leave. */
  state?: SandboxStateDigest;
  /** How long making that digest took. */
  stateMs?: number;
  /** Taken over from an earlier attempt (failurePolicy.resume 'replay'): how its replay into this attempt's sandbox went. */
  restored?: { fromAttempt: number; fromRollout?: string; replayExitCode: number | null; replayMs: number; drift: boolean };
  /** A command a harness ran (policy kind harness) through the sandbox bridge: where it asked it to run. */
  harnessExec?: { cwd?: string; env?: string[]; beforeFirstCall?: boolean };
}

export const metaName = (attempt: number): string => `${attemptPrefix(attempt)}meta.json`;
export const policyName = (attempt: number, turn: number): string => turnName(attempt, turn, 'policy');
export const toolName = (attempt: number, turn: number, callIndex: number): string => turnName(attempt, turn, `tool-${String(callIndex).padStart(2, '0')}`);

export async function loadConversation(store: TrajectoryStore, ref: string, attempt: number, beforeTurn: number): Promise<ChatMessage[]> {
  const meta = await store.get<AttemptMeta>(ref, metaName(attempt));
  if (!meta) throw new Error(`trajectory ${ref} attempt ${attempt} has no meta.json`);
  const messages: ChatMessage[] = [
    { role: 'system', content: meta.system },
    { role: 'user', content: meta.instruction },
  ];
  for (let turn = 0; turn < beforeTurn; turn++) {
    const policy = await store.get<PolicyTurnRecord>(ref, policyName(attempt, turn));
    if (!policy) throw new Error(`trajectory ${ref} attempt ${attempt} is missing turn ${turn}`);
    messages.push(policy.assistant);
    for (const [i, call] of (policy.assistant.tool_calls ?? []).entries()) {
      const tool = await store.get<ToolTurnRecord>(ref, toolName(attempt, turn, i));
      messages.push({ role: 'tool', tool_call_id: call.id, content: tool?.observation ?? 'error: this tool call was not run' });
    }
  }
  return messages;
}
