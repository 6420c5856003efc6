/**
 * One turn as the viewer shows it: the policy's message (content, reasoning),
 * then each tool call with its arguments and what came back (exit code,
 * duration, each output stream cut to a few lines with its size).
 */
import { parseBashObservation } from '../../agent/bashObservation.js';
import type { ToolTurnRecord } from '../../agent/conversation.js';
import type { TurnSampling } from '../../shared/tokens.js';
import type { ToolCall } from '../../shared/tools.js';
import type { TrajectoryTurn } from '../loadTrajectory.js';
import { excerpt, type Excerpt } from './excerpt.js';

/** A named piece of text: the excerpt shown, and the whole for pages that can fold it away. */
export interface Section {
  label: string;
  excerpt: Excerpt;
  full: string;
}

export interface ToolResultView {
  exitCode: number | null;
  timedOut: boolean;
  /** The sandbox dropped output past maxOutputBytes. */
  truncated: boolean;
  durationMs: number;
  malformed: boolean;
  sections: Section[];
}

export interface ToolCallView {
  callIndex: number;
  name: string;
  /** One line: `bash $ pytest -x`, `write_file /app/x.py`, `submit`. */
  headline: string;
  arguments: Section[];
  result?: ToolResultView;
  /** Why there is no result, when there is none. */
  note?: string;
}

export interface TurnView {
  turn: number;
  latencyMs: number;
  model: string;
  finishReason: string | null;
  usage: Record<string, number> | null;
  content?: Section;
  reasoning?: Section;
  calls: ToolCallView[];
  /** What a trainer gets from this turn: ids, their source, the template, the prefix check, the policy version. */
  tokens?: string;
  /** The turn was taken over from an earlier attempt (resume by replay), not generated again. */
  restored?: string;
}

export interface ViewOptions {
  /** Lines shown of each output, argument or message before it is cut. */
  lines: number;
}

function section(label: string, text: string, lines: number, from: 'head' | 'tail'): Section {
  return { label, excerpt: excerpt(text, lines, from), full: text };
}

function parsedArguments(call: ToolCall): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(call.function.arguments);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function firstLine(s: string): string {
  const line = s.split('\n')[0] ?? '';
  const short = line.length > 160 ? `${line.slice(0, 160)}…` : line;
  return s.includes('\n') ? `${short} …` : short;
}

function describeCall(call: ToolCall, options: ViewOptions): Pick<ToolCallView, 'headline' | 'arguments'> {
  const name = call.function.name;
  const args = parsedArguments(call);
  const str = (k: string): string | undefined => (typeof args?.[k] === 'string' ? args[k] : undefined);
  const command = str('command');
  if (name === 'bash' && command !== undefined) {
    const timeout = typeof args?.timeout_sec === 'number' ? ` (timeout ${args.timeout_sec} s)` : '';
    return { headline: `bash $ ${firstLine(command)}${timeout}`, arguments: command.includes('\n') ? [section('command', command, options.lines, 'head')] : [] };
  }
  const path = str('path');
  if (name === 'read_file' && path !== undefined) return { headline: `read_file ${path}`, arguments: [] };
  const content = str('content');
  if (name === 'write_file' && path !== undefined && content !== undefined) return { headline: `write_file ${path}`, arguments: [section('content', content, options.lines, 'head')] };
  if (name === 'submit') return { headline: 'submit', arguments: [] };
  return { headline: name || '(no tool name)', arguments: [section('arguments', call.function.arguments, options.lines, 'head')] };
}

function resultView(record: ToolTurnRecord, options: ViewOptions): ToolResultView {
  const base = { exitCode: record.exitCode, timedOut: record.timedOut, truncated: record.truncated, durationMs: record.durationMs, malformed: record.malformed };
  const streams = record.name === 'bash' && !record.malformed ? parseBashObservation(record.observation) : undefined;
  const sections = streams
    ? [section('stdout', streams.stdout, options.lines, 'tail'), section('stderr', streams.stderr, options.lines, 'tail')]
    : [section(record.malformed ? 'error' : 'output', record.observation, options.lines, record.name === 'read_file' ? 'head' : 'tail')];
  return { ...base, sections };
}

export function turnView(turn: TrajectoryTurn, options: ViewOptions, attemptEnded: boolean): TurnView {
  const { policy } = turn;
  // A harness's turn (policy kind harness): the commands it ran after this answer, as the bridge recorded them.
  const harnessCalls = policy.harnessRequest
    ? turn.tools.map((record): ToolCallView => ({
        callIndex: record.callIndex,
        name: record.name,
        ...describeCall({ id: record.toolCallId, type: 'function', function: { name: record.name, arguments: record.arguments } }, options),
        result: resultView(record, options),
      }))
    : undefined;
  const calls = harnessCalls ?? (policy.assistant.tool_calls ?? []).map((call, callIndex): ToolCallView => {
    const view: ToolCallView = { callIndex, name: call.function.name, ...describeCall(call, options) };
    const record = turn.tools.find((t) => t.callIndex === callIndex);
    if (record) view.result = resultView(record, options);
    else if (call.function.name === 'submit') view.note = 'the agent stopped here; the verifier ran next';
    else view.note = attemptEnded ? 'no result recorded: the attempt ended before or during this call' : 'running now, or not started yet';
    return view;
  });
  const view: TurnView = {
    turn: policy.turn,
    latencyMs: policy.latencyMs,
    model: policy.model,
    finishReason: policy.finishReason,
    usage: policy.usage,
    ...(policy.assistant.content ? { content: section('message', policy.assistant.content, options.lines * 2, 'head') } : {}),
    ...(policy.reasoning ? { reasoning: section('reasoning', policy.reasoning, options.lines * 2, 'head') } : {}),
    calls,
  };
  if (policy.restored) view.restored = restoredFact(policy.restored, turn.tools);
  const tokens = tokenFacts(policy);
  return tokens === undefined ? view : { ...view, tokens };
}

/** `taken over from attempt 1 (not generated again); its 2 calls replayed, 1 output drifted in text only`. */
function restoredFact(from: { fromAttempt: number; fromRollout?: string }, tools: TrajectoryTurn['tools']): string {
  const replayed = tools.filter((t) => t.restored);
  const drifted = replayed.filter((t) => t.restored?.drift).length;
  const calls =
    replayed.length === 0
      ? ''
      : `; its ${replayed.length === 1 ? 'call' : `${replayed.length} calls`} replayed into this sandbox${drifted > 0 ? `, ${drifted} output${drifted === 1 ? '' : 's'} differing in text only (the recorded one is kept)` : ''}`;
  const source = from.fromRollout ? `rollout ${from.fromRollout} (attempt ${from.fromAttempt + 1}), the branch's parent` : `attempt ${from.fromAttempt + 1}`;
  return `taken over from ${source} (the model was not asked again)${calls}`;
}

/** How the turn was sampled and whether its logprobs are the sampling distribution's (the export leaves a flagged one out). */
function samplingFact(sampling: TurnSampling | undefined): string {
  if (!sampling) return 'LOGPROBS UNVERIFIED: recorded before sampling was kept';
  const p = sampling.params;
  const shape = [
    `temperature ${p.temperature ?? 'default'}`,
    p.top_k !== null && p.top_k > 0 ? `top_k ${p.top_k}` : '',
    p.top_p !== null && p.top_p < 1 ? `top_p ${p.top_p}` : '',
    p.min_p ? `min_p ${p.min_p}` : '',
  ]
    .filter(Boolean)
    .join(' ');
  const head = `sampled at ${shape} on ${sampling.server} (${sampling.paramsFrom === 'server' ? 'as it reported' : 'as sent'}), ${sampling.logprobs} logprobs`;
  return sampling.mismatch ? `${head} · LOGPROBS NOT THE SAMPLING DISTRIBUTION'S: ${sampling.mismatch}` : head;
}

/** One line on the turn's token data; undefined for records that say nothing about tokens (scripted policies, old records). */
export function tokenFacts(policy: TrajectoryTurn['policy']): string | undefined {
  const facts: string[] = [];
  const ids = policy.turnTokens;
  if (ids && 'reason' in ids) facts.push(`no token ids: ${ids.reason}`);
  else if (ids) {
    facts.push(`token ids: prompt ${ids.promptIds.length} + completion ${ids.completionIds.length} (${ids.source})`);
    if (ids.chatTemplate) facts.push(`template ${ids.chatTemplate.source} sha256 ${ids.chatTemplate.sha256.slice(0, 12)}${ids.chatTemplate.file ? ` (${ids.chatTemplate.file})` : ''}`);
    facts.push(samplingFact(ids.sampling));
  }
  if (policy.segmentStart) facts.push(`new training segment (the harness rewrote its history): ${policy.segmentStart}`);
  else if (policy.prefixCheck) facts.push(policy.prefixCheck.ok ? 'prefix ok' : `prefix break at ${policy.prefixCheck.position}: ${policy.prefixCheck.reason}`);
  if (policy.policyVersion !== undefined && facts.length > 0) facts.push(`policy version ${policy.policyVersion}`);
  return facts.length > 0 ? facts.join(' · ') : undefined;
}
