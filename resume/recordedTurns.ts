/**
 * The turns an attempt finished, as its trajectory holds them: a turn is finished when its policy
 * answer is recorded and so is every tool call of that answer that runs (all but a well-formed
 * submit). The store is the truth here, not the workflow's count: a worker may have recorded a call
 * and died before the server heard of it.
 */
import type { ToolCall } from '../shared/tools.js';
import { policyName, toolName, type PolicyTurnRecord, type ToolTurnRecord } from '../agent/conversation.js';
import { parseToolCall } from '../agent/toolArguments.js';
import type { TrajectoryStore } from '../stores/trajectoryStore.js';

export interface RecordedTurn {
  policy: PolicyTurnRecord;
  /** The records of the calls that ran, by call index (a submit has none). */
  tools: Map<number, ToolTurnRecord>;
  /** The policy called submit (or answered without a call): the loop ended after this turn. */
  submitted: boolean;
}

export interface RecordedAttempt {
  finished: RecordedTurn[];
  /** The answer of the turn the attempt was in when it stopped, when it had one. */
  interrupted: PolicyTurnRecord | null;
}

/** Whether a call runs in the sandbox (every call but a well-formed submit). */
export const runsInSandbox = (call: ToolCall): boolean => !(call.function.name === 'submit' && parseToolCall(call).ok);

export async function readRecordedTurns(store: TrajectoryStore, ref: string, attempt: number): Promise<RecordedAttempt> {
  const finished: RecordedTurn[] = [];
  for (let turn = 0; ; turn++) {
    const policy = await store.get<PolicyTurnRecord>(ref, policyName(attempt, turn));
    if (!policy) return { finished, interrupted: null };
    const calls = policy.assistant.tool_calls ?? [];
    const tools = new Map<number, ToolTurnRecord>();
    for (const [i, call] of calls.entries()) {
      if (!runsInSandbox(call)) continue;
      const record = await store.get<ToolTurnRecord>(ref, toolName(attempt, turn, i));
      if (!record) return { finished, interrupted: policy };
      tools.set(i, record);
    }
    const submitted = calls.length === 0 || calls.some((c) => c.function.name === 'submit' && parseToolCall(c).ok);
    finished.push({ policy, tools, submitted });
    if (submitted) return { finished, interrupted: null };
  }
}
