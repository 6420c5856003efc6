/**
 * Replays an attempt's finished turns into a fresh sandbox, call by call, and checks that each
 * call did what it did the first time: the same exit code (and timeout), and the same sandbox state
 * after it (the digest recorded with the original call, when the provider makes digests). Output
 * that differs in text only (a duration, a time in a log line) is drift: the model saw the
 * recorded text, which is kept; it is counted, not a reason to refuse.
 */
import type { SandboxHandle, SandboxProvider, SandboxStateDigest } from '../shared/sandbox.js';
import { executeToolCall } from '../agent/executeTool.js';
import { runsInSandbox, type RecordedTurn } from './recordedTurns.js';

export interface ReplayLimits {
  workdir: string;
  commandTimeoutSec: number;
  maxOutputBytes: number;
}

export interface ReplayedCall {
  turn: number;
  callIndex: number;
  exitCode: number | null;
  durationMs: number;
  /** The output, or the caches, logs and bytecode it left, differed from the recorded ones (the exit code and the other files did not). */
  drift: boolean;
}

export type ReplayResult =
  | { status: 'same'; calls: ReplayedCall[]; stateChecked: boolean }
  | { status: 'diverged'; calls: ReplayedCall[]; turn: number; callIndex: number; what: string };

export async function replayTurns(
  provider: SandboxProvider,
  handle: SandboxHandle,
  turns: readonly RecordedTurn[],
  limits: ReplayLimits,
  keyPrefix: string,
  signal?: AbortSignal,
): Promise<ReplayResult> {
  const calls: ReplayedCall[] = [];
  let stateChecked = provider.stateDigest !== undefined;
  for (const [turn, recorded] of turns.entries()) {
    for (const [callIndex, call] of (recorded.policy.assistant.tool_calls ?? []).entries()) {
      if (!runsInSandbox(call)) continue;
      signal?.throwIfAborted();
      const original = recorded.tools.get(callIndex);
      if (!original) throw new Error(`turn ${turn} call ${callIndex} has no record to replay`);
      // A call the agent's budget cut short is cut at the same point again.
      const remainingMs = original.timedOut ? Math.max(1000, original.durationMs) : limits.commandTimeoutSec * 1000;
      const again = await executeToolCall(
        provider,
        handle,
        call,
        { ...limits, remainingMs },
        { key: `${keyPrefix}/turn-${turn}/call-${callIndex}`, ...(signal ? { signal } : {}) },
      );
      const done: ReplayedCall = { turn, callIndex, exitCode: again.exitCode, durationMs: again.durationMs, drift: again.observation !== original.observation };
      calls.push(done);
      if (again.exitCode !== original.exitCode || again.timedOut !== original.timedOut) {
        const was = (r: { exitCode: number | null; timedOut: boolean }): string => (r.timedOut ? 'timed out' : `exit code ${r.exitCode ?? 'none'}`);
        return { status: 'diverged', calls, turn, callIndex, what: `${call.function.name}: ${was(original)} the first time, ${was(again)} in the replay` };
      }
      if (!original.state || !provider.stateDigest) {
        stateChecked = false;
        continue;
      }
      if (original.state.tooLarge)
        return {
          status: 'diverged',
          calls,
          turn,
          callIndex,
          what: `the sandbox's files were too large to digest after the call the first time (${original.state.tooLarge}): the replay cannot be checked`,
        };
      const state = await provider.stateDigest(handle);
      if (state.tooLarge)
        return {
          status: 'diverged',
          calls,
          turn,
          callIndex,
          what: `the sandbox's files are too large to digest after the call in the replay (${state.tooLarge})`,
        };
      if (state.digest !== original.state.digest)
        return { status: 'diverged', calls, turn, callIndex, what: `the sandbox's files differ after the call: ${differingAreas(original.state, state)}` };
      // Caches, logs and bytecode made at another time: drift, as a time in the output is.
      if (state.volatile?.digest !== original.state.volatile?.digest) done.drift = true;
    }
  }
  return { status: 'same', calls, stateChecked };
}

/** The areas whose files differ between two digests, named for a person (at most 8). */
export function differingAreas(a: SandboxStateDigest, b: SandboxStateDigest): string {
  const names = [...new Set([...Object.keys(a.areas), ...Object.keys(b.areas)])].sort();
  const differ = names.filter((n) => a.areas[n] !== b.areas[n]).map((n) => (a.areas[n] === undefined ? `${n} (only in the replay)` : b.areas[n] === undefined ? `${n} (only the first time)` : n));
  if (differ.length === 0) return `${a.files} entries the first time, ${b.files} in the replay`;
  return differ.length > 8 ? `${differ.slice(0, 8).join(', ')} and ${differ.length - 8} more` : differ.join(', ');
}
