/**
 * Runs one tool call in the attempt's sandbox and turns the result into the
 * observation the policy sees. A bad call (unknown tool, invalid JSON, a
 * missing file) is the model's problem and comes back as an error
 * observation; a broken sandbox is infra and is thrown.
 */
import { posix } from 'node:path';
import { ClassifiedError } from '../shared/failures.js';
import type { SandboxHandle, SandboxProvider } from '../shared/sandbox.js';
import type { ToolCall } from '../shared/tools.js';
import { formatBashObservation } from './bashObservation.js';
import type { ToolTurnRecord } from './conversation.js';
import { parseToolCall } from './toolArguments.js';

export interface ToolLimits {
  workdir: string;
  commandTimeoutSec: number;
  maxOutputBytes: number;
  /** What is left of the agent's time budget; no command may run past it. */
  remainingMs: number;
}

export interface ToolControl {
  /** Cancels the running command (the activity was cancelled). */
  signal?: AbortSignal;
  /** Names the command across retries of the same call (see ExecOptions.key). */
  key?: string;
}

type ToolOutcome = Omit<ToolTurnRecord, 'turn' | 'callIndex'>;

export async function executeToolCall(provider: SandboxProvider, handle: SandboxHandle, call: ToolCall, limits: ToolLimits, control: ToolControl = {}): Promise<ToolOutcome> {
  const base = { toolCallId: call.id, name: call.function.name, arguments: call.function.arguments };
  const parsed = parseToolCall(call);
  if (!parsed.ok) {
    return { ...base, observation: `error: ${parsed.error}`, exitCode: null, timedOut: false, truncated: false, durationMs: 0, malformed: true };
  }
  const started = performance.now();
  const done = (observation: string, extra: Partial<ToolOutcome> = {}): ToolOutcome => ({
    ...base,
    observation,
    exitCode: null,
    timedOut: false,
    truncated: false,
    durationMs: performance.now() - started,
    malformed: false,
    ...extra,
  });
  const resolvePath = (p: string): string => posix.resolve(limits.workdir, p);

  try {
    switch (parsed.name) {
      case 'bash': {
        const timeoutSec = Math.min(parsed.args.timeout_sec ?? limits.commandTimeoutSec, limits.commandTimeoutSec, Math.max(1, limits.remainingMs / 1000));
        const r = await provider.exec(handle, parsed.args.command, {
          timeoutMs: Math.round(timeoutSec * 1000),
          maxOutputBytes: limits.maxOutputBytes,
          ...(control.signal ? { signal: control.signal } : {}),
          ...(control.key !== undefined ? { key: control.key } : {}),
        });
        return done(formatBashObservation(r, timeoutSec), { exitCode: r.exitCode, timedOut: r.timedOut, truncated: r.stdoutTruncated || r.stderrTruncated, durationMs: r.durationMs });
      }
      case 'read_file': {
        try {
          const bytes = await provider.readFile(handle, resolvePath(parsed.args.path), { maxBytes: limits.maxOutputBytes });
          return done(Buffer.from(bytes).toString('utf8'));
        } catch (err) {
          if (err instanceof ClassifiedError) throw err;
          return done(`error: ${(err as Error).message}`);
        }
      }
      case 'write_file': {
        try {
          await provider.writeFile(handle, resolvePath(parsed.args.path), parsed.args.content);
          return done(`wrote ${Buffer.byteLength(parsed.args.content)} bytes to ${resolvePath(parsed.args.path)}`);
        } catch (err) {
          if (err instanceof ClassifiedError) throw err;
          return done(`error: ${(err as Error).message}`);
        }
      }
      case 'submit':
        return done('submitted');
    }
  } catch (err) {
    if (err instanceof ClassifiedError) throw err;
    if (control.signal?.aborted) throw control.signal.reason; // cancelled: not a transport failure
    throw new ClassifiedError('infra', 'exec_transport', `tool ${parsed.name} could not reach the sandbox: ${(err as Error).message}`, { cause: err });
  }
}
