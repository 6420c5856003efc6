/**
 * One command a harness runs in the rollout's sandbox through the bridge: run by the provider with the
 * rollout's limits (command timeout, output cap, what is left of the agent's time), recorded as a tool
 * call of the turn whose answer asked for it (ToolTurnRecord), and answered as the harness expects.
 */
import type { SandboxHandle, SandboxProvider } from '../shared/sandbox.js';
import type { ToolTurnRecord } from '../agent/conversation.js';

export interface BridgedCommand {
  command: string;
  cwd?: string;
  env: Record<string, string>;
  timeoutSec?: number;
  toolCallId?: string;
}

/** The bridge's request, or why it cannot be run. */
export function readBridgedCommand(body: Record<string, unknown>): BridgedCommand | string {
  if (typeof body.command !== 'string') return 'the request has no command (a string)';
  const env: Record<string, string> = {};
  if (body.env !== undefined && body.env !== null) {
    if (typeof body.env !== 'object' || Array.isArray(body.env)) return 'env must be an object of strings';
    for (const [k, v] of Object.entries(body.env)) env[k] = String(v);
  }
  const label = (typeof body.label === 'object' && body.label !== null ? body.label : {}) as Record<string, unknown>;
  return {
    command: body.command,
    ...(typeof body.cwd === 'string' && body.cwd !== '' ? { cwd: body.cwd } : {}),
    env,
    ...(typeof body.timeoutSec === 'number' && body.timeoutSec > 0 ? { timeoutSec: body.timeoutSec } : {}),
    ...(typeof label.toolCallId === 'string' ? { toolCallId: label.toolCallId } : {}),
  };
}

export interface CommandLimits {
  workdir: string;
  commandTimeoutSec: number;
  maxOutputBytes: number;
  remainingMs: number;
}

/** Runs the command; a sandbox that cannot be reached is thrown (infra), the command's own failure is its result. */
export async function runBridgedCommand(
  provider: SandboxProvider,
  handle: SandboxHandle,
  c: BridgedCommand,
  limits: CommandLimits,
  where: { turn: number; callIndex: number; key: string; beforeFirstCall?: boolean },
  signal?: AbortSignal,
): Promise<{ record: ToolTurnRecord; reply: Record<string, unknown> }> {
  const timeoutSec = Math.min(c.timeoutSec ?? limits.commandTimeoutSec, limits.commandTimeoutSec, Math.max(1, limits.remainingMs / 1000));
  const stepStartedAt = Date.now();
  const started = performance.now();
  const r = await provider.exec(handle, c.command, {
    timeoutMs: Math.round(timeoutSec * 1000),
    maxOutputBytes: limits.maxOutputBytes,
    cwd: c.cwd ?? limits.workdir,
    ...(Object.keys(c.env).length > 0 ? { env: c.env } : {}),
    key: where.key,
    ...(signal ? { signal } : {}),
  });
  const durationMs = performance.now() - started;
  const record: ToolTurnRecord = {
    turn: where.turn,
    callIndex: where.callIndex,
    toolCallId: c.toolCallId ?? `harness_exec_${where.turn}_${where.callIndex}`,
    name: 'bash',
    arguments: JSON.stringify({ command: c.command }),
    observation: r.stdout + r.stderr,
    exitCode: r.timedOut ? null : r.exitCode,
    timedOut: r.timedOut,
    truncated: r.stdoutTruncated || r.stderrTruncated,
    durationMs,
    malformed: false,
    clock: { stepStartedAt, callStartedAt: stepStartedAt, callEndedAt: stepStartedAt + durationMs },
    harnessExec: { ...(c.cwd ? { cwd: c.cwd } : {}), ...(Object.keys(c.env).length > 0 ? { env: Object.keys(c.env) } : {}), ...(where.beforeFirstCall ? { beforeFirstCall: true } : {}) },
  };
  return { record, reply: { stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode, timedOut: r.timedOut } };
}
