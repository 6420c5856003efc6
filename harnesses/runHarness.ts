/**
 * The `harness` policy's agent stage: one long activity on the sandbox's host that runs a published
 * harness, unmodified, from its venv (harnessInstall.ts), against a capture endpoint served for this
 * attempt (captureEndpoint.ts). Every model call it makes is forwarded and recorded as a turn
 * (capturedCall.ts); every command it runs goes to the sandbox through the provider and is recorded
 * as a tool call of that turn (bridgedCommand.ts). It heartbeats with what the harness is doing, so
 * the Web UI shows it and a dead worker is noticed.
 *
 * Limits are the rollout's: maxTurns counts captured calls, the agent time budget bounds the run,
 * commandTimeoutSec and maxOutputBytes bound each command. What ended the run comes back as the
 * attempt's model outcome (harnessOutcome.ts); an inference server or sandbox that failed under the
 * harness is thrown as infra with the harness's stderr tail as evidence.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Context } from '@temporalio/activity';
import type { Logger } from 'pino';
import { ClassifiedError, failureName, parseFailureName, type FailureType } from '../shared/failures.js';
import type { ResolvedGroupInput } from '../shared/pipeline.js';
import type { SandboxHandle, SandboxProvider } from '../shared/sandbox.js';
import type { LoadedTask } from '../shared/task.js';
import type { MissingTokens, TurnTokens } from '../shared/tokens.js';
import { policyName, toolName } from '../agent/conversation.js';
import type { PipelineMetrics } from '../agent/pipelineMetrics.js';
import type { PolicyClient } from '../policies/policyClient.js';
import { policyLabel } from '../shared/policyLabel.js';
import type { TurnTokenStatus } from '../policies/tokens/turnIntegrity.js';
import { attemptPrefix, type TrajectoryStore } from '../stores/trajectoryStore.js';
import { readBridgedCommand, runBridgedCommand } from './bridgedCommand.js';
import { openaiError, startCaptureEndpoint, type EndpointReply } from './captureEndpoint.js';
import { captureCall, chatCompletion, readHarnessRequest } from './capturedCall.js';
import { clientFailure } from '../agent/meteredPolicyCall.js';
import { harnessOutcome, type HarnessEnd } from './harnessOutcome.js';
import { installedHarness } from './harnessInstall.js';
import { startHarnessProcess, type HarnessExitStatus } from './harnessProcess.js';
import { CAPTURE_SOCKET, handOver, harnessUid } from './harnessJail.js';

export interface HarnessRunInput {
  handle: SandboxHandle;
  group: ResolvedGroupInput;
  index: number;
  attempt: number;
  trajectoryRef: string;
  workdir: string;
  /** The agent's time budget left for this run, in ms. */
  remainingMs: number;
  policyVersion: number;
}

export interface HarnessRunOutput {
  /** Captured model calls: the attempt's turns. */
  turns: number;
  commands: number;
  /** Each turn's token status; a turn that starts a new segment (the harness rewrote its history) is ok. */
  tokens: TurnTokenStatus[];
  /** Turns that start a new training segment, after turn 0. */
  segmentStarts: number[];
  /** null: the harness submitted. */
  end: HarnessEnd | null;
  exitStatus: string | null;
  exitCode: number | null;
  /** Each captured call and each command, one line each (`turn 2: $ ls -la → exit 0`): what the Web UI shows of the run. */
  log: string[];
}

export interface HarnessDeps {
  provider: SandboxProvider;
  store: TrajectoryStore;
  logger: Logger;
  host: string;
  client: PolicyClient;
  task: LoadedTask;
  metrics: PipelineMetrics;
}

/** Infra trouble from the inference server is retried here this often before the run is given up (the harness retries on its own too). */
const INFERENCE_TRIES = 3;
const KILL_GRACE_MS = 5000;

/** Tells a harness's exit apart: what the run saw decides before the harness's own account. */
interface RunState {
  turns: number;
  commands: number;
  /** Tool calls recorded for the current turn. */
  turnCommands: number;
  tokens: TurnTokenStatus[];
  segmentStarts: number[];
  previousTokens: TurnTokens | MissingTokens | undefined;
  /** Set by the run itself (a limit hit, the inference server or the sandbox failing): the harness is stopped. */
  stopped: HarnessEnd | ClassifiedError | null;
  sawContextOverflow: boolean;
  recent: string[];
  /** Every line of `recent`, for the activity's result (the Web UI shows it once the run ended), up to LOG_LINES. */
  log: string[];
}

/** Lines of a run kept in its result; past them the result says how many more there were. */
const LOG_LINES = 400;

function remember(state: RunState, line: string): void {
  const short = line.length > 160 ? `${line.slice(0, 157)}...` : line;
  state.recent.push(short);
  if (state.recent.length > 8) state.recent.shift();
  if (state.log.length < LOG_LINES) state.log.push(short);
  else if (state.log.length === LOG_LINES) state.log.push('... (the trajectory has every call and command: rollout show)');
}

export async function runHarness(deps: HarnessDeps, input: HarnessRunInput): Promise<HarnessRunOutput> {
  const { group, attempt, trajectoryRef } = input;
  const policy = group.policy;
  if (policy.kind !== 'harness') throw new ClassifiedError('task', 'invalid_spec', `runHarness needs a policy of kind harness, not ${policy.kind}`);
  const harness = installedHarness(policy.harness, deps.host);
  const log = deps.logger.child({ harness: harness.name, trajectoryRef, attempt });
  let context: Context | undefined;
  try {
    context = Context.current();
  } catch {
    context = undefined; // outside an activity (a test): no heartbeats
  }
  const signal = context?.cancellationSignal;
  // Ends what the harness left in flight (a command still running, a model call) once the run is over.
  const runOver = new AbortController();
  const inFlight = signal ? AbortSignal.any([signal, runOver.signal]) : runOver.signal;
  const deadline = Date.now() + input.remainingMs;
  const state: RunState = { turns: 0, commands: 0, turnCommands: 0, tokens: [], segmentStarts: [], previousTokens: undefined, stopped: null, sawContextOverflow: false, recent: [], log: [] };
  let stopHarness: (why: HarnessEnd | ClassifiedError) => void = () => undefined;

  // One model call at a time: each is the next turn, built on the one before it.
  let calls: Promise<unknown> = Promise.resolve();
  const chat = (body: Record<string, unknown>): Promise<EndpointReply> => {
    const next = calls.then(() => chatCall(body));
    calls = next.catch(() => undefined);
    return next;
  };
  const chatCall = async (body: Record<string, unknown>): Promise<EndpointReply> => {
    if (state.stopped) return openaiError(503, 'this rollout has ended', 'server_error');
    const request = readHarnessRequest(body);
    if (typeof request === 'string') return openaiError(400, request);
    const turn = state.turns;
    if (turn >= group.limits.maxTurns) {
      stopHarness({ failureClass: 'model', type: 'max_turns', message: `${harness.name} asked for model call ${turn + 1}, past limits.maxTurns ${group.limits.maxTurns}` });
      return openaiError(400, `rollout limit: ${group.limits.maxTurns} model calls (limits.maxTurns)`);
    }
    for (let tryNo = 1; ; tryNo++) {
      try {
        const captured = await captureCall(request, {
          client: deps.client,
          task: deps.task,
          rolloutIndex: input.index,
          attempt,
          turn,
          sessionKey: trajectoryRef,
          policyVersion: input.policyVersion,
          previousTokens: state.previousTokens,
          signal: inFlight,
          metrics: deps.metrics,
          model: policyLabel(policy),
          log,
        });
        let tokens = captured.tokens;
        if (tokens.status === 'broken') {
          // The harness rewrote its history (a summary, a dropped reply): a new segment starts here, by design.
          captured.record.segmentStart = tokens.reason ?? 'the prompt does not extend the previous turn';
          state.segmentStarts.push(turn);
          tokens = { status: 'ok' };
        }
        await deps.store.put(trajectoryRef, policyName(attempt, turn), captured.record);
        state.turns = turn + 1;
        // Commands the harness ran before its first call (its set-up) stay turn 0's, numbered before that turn's own.
        if (turn > 0) state.turnCommands = 0;
        state.tokens.push(tokens);
        state.previousTokens = captured.record.turnTokens;
        const calls = captured.record.assistant.tool_calls?.map((c) => c.function.name).join(', ');
        remember(state, `turn ${turn}: model answered${calls ? ` (${calls})` : ''}${captured.record.segmentStart ? ' · new segment' : ''}`);
        return { status: 200, body: chatCompletion(captured.record, turn) };
      } catch (err) {
        const f = clientFailure(err);
        if (f.name === failureName({ failureClass: 'model', type: 'context_overflow' })) {
          state.sawContextOverflow = true;
          remember(state, `turn ${turn}: context overflow`);
          // The words llama.cpp uses, which litellm maps to ContextWindowExceededError: the harness may shorten its history.
          return openaiError(400, `the request exceeds the available context size: ${f.message}`);
        }
        const parsed = parseFailureName(f.name);
        if (parsed?.failureClass === 'model') {
          stopHarness({ failureClass: 'model', type: parsed.type as FailureType<'model'>, message: f.message });
          return openaiError(400, f.message);
        }
        if (f.retryable && tryNo < INFERENCE_TRIES) {
          log.warn({ turn, tryNo, failure: f.name, error: f.message }, 'harness model call failed; retrying');
          await new Promise((r) => setTimeout(r, 2000 * tryNo));
          continue;
        }
        stopHarness(new ClassifiedError('infra', 'policy_unavailable', `${harness.name}'s model call ${turn} failed ${tryNo} times: ${f.name}: ${f.message}`));
        return openaiError(503, f.message, 'server_error');
      }
    }
  };

  const exec = async (body: Record<string, unknown>): Promise<EndpointReply> => {
    if (state.stopped) return openaiError(503, 'this rollout has ended', 'server_error');
    const command = readBridgedCommand(body);
    if (typeof command === 'string') return openaiError(400, command);
    const turn = Math.max(0, state.turns - 1);
    const callIndex = state.turnCommands++;
    const key = toolName(attempt, turn, callIndex);
    try {
      const { record, reply } = await runBridgedCommand(
        deps.provider,
        input.handle,
        command,
        {
          workdir: input.workdir,
          commandTimeoutSec: group.limits.commandTimeoutSec,
          maxOutputBytes: group.limits.maxOutputBytes,
          remainingMs: deadline - Date.now(),
        },
        { turn, callIndex, key, beforeFirstCall: state.turns === 0 },
        inFlight,
      );
      await deps.store.put(trajectoryRef, key, record);
      state.commands++;
      remember(state, `turn ${turn}: $ ${command.command.replace(/\s+/g, ' ')} → ${record.timedOut ? 'timed out' : `exit ${record.exitCode}`}`);
      return { status: 200, body: reply };
    } catch (err) {
      const failure =
        err instanceof ClassifiedError
          ? err
          : new ClassifiedError('infra', 'exec_transport', `${harness.name}'s command could not reach sandbox ${input.handle.id}: ${(err as Error).message}`, {
              cause: err,
            });
      stopHarness(failure);
      return openaiError(503, failure.message, 'server_error');
    }
  };

  const runDir = await mkdtemp(join(tmpdir(), 'rollout-harness-'));
  const endpoint = await startCaptureEndpoint({ chat, exec, model: policy.inference.model }, { socketPath: join(runDir, CAPTURE_SOCKET) }).catch(async (err: unknown) => {
    await rm(runDir, { recursive: true, force: true });
    throw err;
  });
  try {
    const run = {
      instruction: deps.task.instruction,
      apiBase: endpoint.apiBase,
      model: policy.inference.model,
      workdir: input.workdir,
      commandTimeoutSec: group.limits.commandTimeoutSec,
      stepLimit: group.limits.maxTurns,
      maxTokens: policy.inference.sampling.max_tokens,
      settings: policy.settings,
      trajectoryPath: join(runDir, 'trajectory.json'),
      resultPath: join(runDir, 'result.json'),
    };
    await writeFile(join(runDir, 'run.json'), JSON.stringify(run));
    handOver(runDir, harnessUid());
    const child = startHarnessProcess(harness, runDir, join(runDir, 'run.json'), endpoint.bridge);
    const killGroup = child.signalGroup;
    stopHarness = (why) => {
      if (state.stopped) return;
      state.stopped = why;
      log.info({ why: why instanceof ClassifiedError ? failureName(why) : `${why.failureClass}/${why.type}` }, 'stopping the harness');
      killGroup('SIGTERM');
      setTimeout(() => killGroup('SIGKILL'), KILL_GRACE_MS).unref();
    };
    const budget = setTimeout(
      () =>
        stopHarness({
          failureClass: 'model',
          type: 'agent_timeout',
          message: `agent time budget used up while ${harness.name} ran (${Math.round(input.remainingMs / 1000)} s left when it started)`,
        }),
      Math.max(0, input.remainingMs),
    );
    const onAbort = (): void => stopHarness(new ClassifiedError('infra', 'worker_lost', 'the harness run was cancelled'));
    signal?.addEventListener('abort', onAbort);
    const beat = context ? setInterval(() => context.heartbeat({ harness: harness.name, turns: state.turns, commands: state.commands, recent: state.recent }), 2000) : undefined;
    let exit: HarnessExitStatus;
    try {
      exit = await child.exited;
    } finally {
      clearTimeout(budget);
      if (beat) clearInterval(beat);
      signal?.removeEventListener('abort', onAbort);
      killGroup('SIGKILL'); // anything the harness left running
    }
    if (signal?.aborted) throw signal.reason instanceof Error ? signal.reason : new Error('cancelled');
    const result = await readFile(run.resultPath, 'utf8').then((t) => JSON.parse(t) as { exitStatus?: string | null; error?: string }, () => undefined);
    const trajectory = await readFile(run.trajectoryPath, 'utf8').then((t) => JSON.parse(t) as unknown, () => undefined);
    if (trajectory !== undefined) await deps.store.put(trajectoryRef, `${attemptPrefix(attempt)}harness-trajectory.json`, trajectory);
    const outcome = harnessOutcome({
      harness: harness.name,
      exitCode: exit.code,
      exitSignal: exit.signal,
      exitStatus: result?.exitStatus ?? null,
      error: result?.error,
      stderrTail: child.outputTail(),
      turns: state.turns,
      stopped: state.stopped,
      sawContextOverflow: state.sawContextOverflow,
    });
    await deps.store.put(trajectoryRef, `${attemptPrefix(attempt)}harness.json`, {
      harness: harness.name,
      version: harness.version,
      settings: policy.settings,
      exitCode: exit.code,
      exitSignal: exit.signal,
      exitStatus: result?.exitStatus ?? null,
      turns: state.turns,
      commands: state.commands,
      segmentStarts: state.segmentStarts,
      end: outcome instanceof ClassifiedError ? outcome.toFailure() : outcome,
      stderrTail: child.outputTail(),
    });
    log.info({ turns: state.turns, commands: state.commands, exitCode: exit.code, exitStatus: result?.exitStatus }, 'harness run ended');
    if (outcome instanceof ClassifiedError) throw outcome;
    return {
      turns: state.turns,
      commands: state.commands,
      tokens: state.tokens,
      segmentStarts: state.segmentStarts,
      end: outcome,
      exitStatus: result?.exitStatus ?? null,
      exitCode: exit.code,
      log: state.log,
    };
  } finally {
    runOver.abort();
    await endpoint.close();
    await rm(runDir, { recursive: true, force: true });
  }
}
