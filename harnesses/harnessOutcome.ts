/**
 * What ended a harness run, in the failure taxonomy. What the run itself saw comes first (a limit it
 * enforced, the inference server or the sandbox failing under the harness: infra, with the harness's
 * stderr tail as evidence); then the harness's own account of its exit. A harness that crashed on its
 * own after calling the model is model/harness_crashed; one that never called it is infra (its settings
 * or install are broken, not the model), named with the fix.
 */
import { ClassifiedError, type Failure, type FailureType } from '../shared/failures.js';

/** How a harness run ended by the model's doing: a model failure of the taxonomy. */
export type HarnessEnd = Failure<'model'>;

export interface HarnessExit {
  harness: string;
  exitCode: number | null;
  exitSignal: string | null;
  /** The harness's own exit status (mini-swe-agent: Submitted, LimitsExceeded, ..., or the exception's name). */
  exitStatus: string | null;
  error?: string | undefined;
  stderrTail: string;
  turns: number;
  stopped: HarnessEnd | ClassifiedError | null;
  sawContextOverflow: boolean;
}

/** mini-swe-agent's exit statuses that are the model's, by our types. */
const MODEL_EXITS: Record<string, { type: FailureType<'model'>; why: string }> = {
  LimitsExceeded: { type: 'max_turns', why: 'the harness reached its step limit (limits.maxTurns)' },
  TimeExceeded: { type: 'agent_timeout', why: "the harness's own wall-time limit" },
  RepeatedFormatError: { type: 'malformed_tool_call', why: 'answers the harness could not read, several in a row' },
  ContextWindowExceededError: { type: 'context_overflow', why: "the conversation no longer fits the model's context" },
};

const tail = (text: string, lines = 20): string[] => text.trimEnd().split('\n').slice(-lines);

/** null: the harness submitted. A ClassifiedError is infra, thrown by the activity. */
export function harnessOutcome(e: HarnessExit): HarnessEnd | ClassifiedError | null {
  const evidence = [`${e.harness} exited with ${e.exitSignal ?? `code ${e.exitCode}`}${e.exitStatus ? ` (${e.exitStatus})` : ''}`, ...tail(e.stderrTail).map((l) => `stderr: ${l}`)];
  if (e.stopped instanceof ClassifiedError) return new ClassifiedError(e.stopped.failureClass, e.stopped.type, e.stopped.message, { evidence: [...e.stopped.evidence, ...evidence] });
  if (e.stopped) return { ...e.stopped, evidence };
  if (e.exitStatus === 'Submitted' && e.exitCode === 0) return null;
  if (e.turns === 0) {
    return new ClassifiedError(
      'infra',
      'harness_never_called_model',
      `${e.harness} ended without calling the model once (${e.exitStatus ?? `exit ${e.exitSignal ?? e.exitCode}`}${e.error ? `: ${e.error.slice(0, 300)}` : ''}). Fix: check policy.settings against the harness's own settings, and that its install works (bash scripts/ensure-harnesses.sh); its stderr is in the evidence`,
      { evidence },
    );
  }
  const known = e.exitStatus ? MODEL_EXITS[e.exitStatus] : undefined;
  if (known) return { failureClass: 'model', type: known.type, message: `${e.harness}: ${known.why} (${e.exitStatus})`, evidence };
  if (e.sawContextOverflow) return { failureClass: 'model', type: 'context_overflow', message: `${e.harness} stopped after the conversation outgrew the model's context`, evidence };
  if (e.exitCode === 0 && e.exitStatus !== null) return { failureClass: 'model', type: 'harness_crashed', message: `${e.harness} ended without submitting (${e.exitStatus})`, evidence };
  return {
    failureClass: 'model',
    type: 'harness_crashed',
    message: `${e.harness} exited with ${e.exitSignal ?? `code ${e.exitCode}`} after ${e.turns} model call${e.turns === 1 ? '' : 's'}${e.error ? `: ${e.error.slice(0, 300)}` : ''}`,
    evidence,
  };
}
