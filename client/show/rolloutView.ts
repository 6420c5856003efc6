/**
 * Everything `rollout show` prints about one rollout, put together from
 * Temporal (result or live progress, attempt history) and the trajectory
 * store (per attempt: instruction, turns, tool results, verifier run). The
 * text and HTML renderers both draw this, so they show the same things.
 */
import type { TrajectoryStore } from '../../stores/trajectoryStore.js';
import type { VerifyOutcome } from '../../verifier/runVerifier.js';
import { FailurePolicySchema, type AttemptSummary } from '../../shared/pipeline.js';
import { loadTrajectory, type TrajectoryAttempt } from '../loadTrajectory.js';
import type { RolloutState } from './readRolloutState.js';
import { excerpt } from './excerpt.js';
import { turnView, type Section, type TurnView, type ViewOptions } from './turnView.js';

export interface VerifyView {
  reward: number | null;
  exitCode: number | null;
  durationMs: number | null;
  mode: string;
  source: string;
  metrics: Record<string, number>;
  tail: Section;
}

export interface AttemptView {
  attempt: number;
  /** How it ended; undefined while it runs (or when Temporal did not say). */
  summary?: AttemptSummary;
  running: boolean;
  /** What the store holds of it, in words ("3 policy turns, 2 tool results, verifier run"). */
  recorded: string;
  startedAt?: string;
  turns: TurnView[];
  verify?: VerifyView;
}

export interface RolloutView {
  state: RolloutState;
  /** Where the trajectory is in the store (a directory, a database key). */
  storeLocation: string;
  /** Set when the store has nothing although an attempt reached a sandbox: probably not the workers' store. */
  storeWarning?: string;
  /** The task's instruction as the policy got it (the same for every attempt). */
  instruction?: Section;
  attempts: AttemptView[];
}

/** Most attempts a rollout can have (1 + the largest infra.retries the schema allows). */
const MAX_ATTEMPTS = 1 + (FailurePolicySchema.shape.infra.unwrap().shape.retries.unwrap().maxValue ?? 10);

function verifyView(v: Partial<VerifyOutcome> & { verifyMs?: number }, options: ViewOptions): VerifyView {
  return {
    reward: typeof v.reward === 'number' ? v.reward : null,
    exitCode: typeof v.exitCode === 'number' ? v.exitCode : null,
    durationMs: typeof v.verifyMs === 'number' ? v.verifyMs : typeof v.durationMs === 'number' ? v.durationMs : null,
    mode: v.mode ?? 'in-place',
    source: v.source ?? '',
    metrics: v.metrics ?? {},
    tail: { label: 'verifier output', excerpt: excerpt(v.outputTail ?? '', options.lines, 'tail'), full: v.outputTail ?? '' },
  };
}

function recordedLine(t: TrajectoryAttempt | undefined): string {
  if (!t) return 'nothing in the store: the attempt never got a sandbox';
  const tools = t.turns.reduce((n, turn) => n + turn.tools.length, 0);
  const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;
  return `${plural(t.turns.length, 'policy turn')}, ${plural(tools, 'tool result')}, ${t.verify ? 'verifier run' : 'no verifier result'}`;
}

export async function buildRolloutView(state: RolloutState, store: TrajectoryStore, options: ViewOptions): Promise<RolloutView> {
  const history = state.result?.attemptHistory ?? state.progress?.attemptHistory ?? [];
  const running = state.status === 'running';
  const known = state.result?.attempts ?? (state.progress ? Math.max(state.progress.attempt + 1, history.length) : undefined);
  const recorded = await loadTrajectory(store, state.trajectoryRef, known ?? MAX_ATTEMPTS);
  const count = Math.max(known ?? 0, history.length, (recorded.at(-1)?.attempt ?? -1) + 1);
  const attempts: AttemptView[] = [];
  for (let attempt = 0; attempt < count; attempt++) {
    const summary = history.find((h) => h.attempt === attempt);
    const t = recorded.find((r) => r.attempt === attempt);
    const isRunning = running && !summary && attempt === count - 1;
    attempts.push({
      attempt,
      ...(summary ? { summary } : {}),
      running: isRunning,
      recorded: recordedLine(t),
      ...(t ? { startedAt: t.meta.startedAt } : {}),
      turns: (t?.turns ?? []).map((turn) => turnView(turn, options, !isRunning)),
      ...(t?.verify ? { verify: verifyView(t.verify, options) } : {}),
    });
  }
  const instruction = recorded[0]?.meta.instruction;
  const reachedSandbox = Boolean(state.result?.experiment) || history.some((h) => h.turns > 0) || (state.progress?.turn ?? 0) > 0;
  const storeLocation = store.locate(state.trajectoryRef);
  const storeWarning =
    recorded.length === 0 && reachedSandbox
      ? `the trajectory store has nothing under ${storeLocation}, yet the rollout ran in a sandbox: pass the store the workers used (--store, --trajectories or --data-dir)`
      : undefined;
  return {
    state,
    storeLocation,
    ...(storeWarning ? { storeWarning } : {}),
    ...(instruction !== undefined ? { instruction: { label: 'instruction', excerpt: excerpt(instruction, options.lines, 'head'), full: instruction } } : {}),
    attempts,
  };
}
