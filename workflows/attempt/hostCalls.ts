/**
 * The calls an attempt makes on its sandbox's host: tool calls, verify, teardown. Either as
 * activities on the host's task queue (the rollout workflow runs elsewhere) or, for an attempt
 * that runs on that host itself (group.attemptOn 'host'), as local activities of its worker.
 */
import type { ProvisionOutput } from '../../activities/contract.js';
import { HEARTBEAT_TIMEOUT } from '../heartbeatTimeout.js';
import { activity, localActivityRunToEnd as localActivity, type SummarizedCall } from './callActivity.js';
import { NON_RETRYABLE } from './nonRetryable.js';

export interface HostCalls {
  tool: SummarizedCall<'runTool'>;
  /** A turn's tool calls in one call: each call's command may take up to its timeout. */
  tools: (calls: number) => SummarizedCall<'runTools'>;
  verify: SummarizedCall<'verifyAttempt'>;
  /** The verdict and the teardown after it in one call (one round trip fewer). */
  verifyThenTeardown: SummarizedCall<'verifyThenTeardown'>;
  teardown: SummarizedCall<'teardownSandbox'>;
  /** Resume: the earlier attempt's turns replayed into this sandbox (an activity on its host, whatever runs the attempt). */
  restoreTurns: SummarizedCall<'restoreTurns'>;
  /** The harness policy's whole agent stage, given the agent time left (an activity on the host's queue, whatever runs the attempt). */
  harness: (remainingMs: number) => SummarizedCall<'runHarness'>;
}

const toolTimeoutSec = (commandTimeoutSec: number): number => Math.ceil(commandTimeoutSec) + 60;
const toolsTimeoutSec = (commandTimeoutSec: number, calls: number): number => (Math.ceil(commandTimeoutSec) + 5) * calls + 60;

export function hostActivities(p: ProvisionOutput, commandTimeoutSec: number): HostCalls {
  const onHost = { taskQueue: p.hostQueue, scheduleToStartTimeout: '1 minute' } as const;
  return {
    // Both heartbeat every 2 s: a worker that dies mid-command is noticed after HEARTBEAT_TIMEOUT, and the
    // call is retried on this host's queue (a restarted worker re-attaches to the surviving sandbox).
    tool: activity('runTool', { ...onHost, startToCloseTimeout: `${toolTimeoutSec(commandTimeoutSec)} seconds`, heartbeatTimeout: HEARTBEAT_TIMEOUT, retry: { maximumAttempts: 3, nonRetryableErrorTypes: NON_RETRYABLE } }),
    tools: (calls: number) => activity('runTools', { ...onHost, startToCloseTimeout: `${toolsTimeoutSec(commandTimeoutSec, calls)} seconds`, heartbeatTimeout: HEARTBEAT_TIMEOUT, retry: { maximumAttempts: 3, nonRetryableErrorTypes: NON_RETRYABLE } }),
    verify: activity('verifyAttempt', { ...onHost, startToCloseTimeout: '30 minutes', heartbeatTimeout: HEARTBEAT_TIMEOUT, retry: { maximumAttempts: 2, nonRetryableErrorTypes: NON_RETRYABLE } }),
    // 2 minutes more than verify for the teardown.
    verifyThenTeardown: activity('verifyThenTeardown', { ...onHost, startToCloseTimeout: '32 minutes', heartbeatTimeout: HEARTBEAT_TIMEOUT, retry: { maximumAttempts: 2, nonRetryableErrorTypes: NON_RETRYABLE } }),
    // Heartbeats too: a teardown started by a worker that then died is retried after HEARTBEAT_TIMEOUT
    // (a cancelled run's next start waits for it), not after the whole 2 minutes.
    teardown: activity('teardownSandbox', { ...onHost, startToCloseTimeout: '2 minutes', heartbeatTimeout: HEARTBEAT_TIMEOUT, retry: { maximumAttempts: 5, initialInterval: '1 second' } }),
    // Once: a replay cut short left part of itself in the sandbox, so a retry there would run calls twice.
    // A failure ends the attempt as infra; the next one restores from the same turns on a fresh sandbox.
    restoreTurns: activity('restoreTurns', { ...onHost, startToCloseTimeout: '2 hours', heartbeatTimeout: HEARTBEAT_TIMEOUT, retry: { maximumAttempts: 1 } }),
    // Once: a harness cut short left its work in the sandbox, and a second run there would not start
    // from the task's start. A worker that dies is noticed by the heartbeat (infra/worker_lost); the next
    // attempt runs the harness again on a fresh sandbox. It may run 10 minutes past the agent's budget
    // (its last command and the records after it).
    harness: (remainingMs: number) =>
      activity('runHarness', { ...onHost, startToCloseTimeout: `${Math.ceil(remainingMs / 1000) + 600} seconds`, heartbeatTimeout: HEARTBEAT_TIMEOUT, retry: { maximumAttempts: 1 } }),
  };
}

/**
 * The longest verifier run as a local activity. A local activity keeps its workflow task open
 * with heartbeats that carry no command; the server times that task out after 30 minutes of them
 * (history.workflowTaskHeartbeatTimeout) and the activity would run again. A task whose verifier
 * may take longer verifies in a regular activity on the same host queue.
 */
export const LONGEST_LOCAL_VERIFY_SEC = 15 * 60;

/**
 * The same calls as local activities of the worker the attempt runs on, which is the sandbox's host.
 * A worker that dies mid-call is noticed when the attempt's workflow task times out (10 s); the next
 * worker of the host replays the attempt and calls again: a tool call returns its recorded result or
 * re-attaches to the command still running in the sandbox (activities/createActivities.ts).
 */
export function hostLocalActivities(p: ProvisionOutput, commandTimeoutSec: number): HostCalls {
  const remote = hostActivities(p, commandTimeoutSec);
  const verifyLocally = (p.verifierTimeoutSec ?? Infinity) <= LONGEST_LOCAL_VERIFY_SEC;
  const local = { localRetryThreshold: '10 seconds' } as const;
  return {
    tool: localActivity('runTool', {
      ...local,
      startToCloseTimeout: `${toolTimeoutSec(commandTimeoutSec)} seconds`,
      retry: { maximumAttempts: 3, nonRetryableErrorTypes: NON_RETRYABLE },
    }),
    tools: (calls: number) =>
      localActivity('runTools', {
        ...local,
        startToCloseTimeout: `${toolsTimeoutSec(commandTimeoutSec, calls)} seconds`,
        retry: { maximumAttempts: 3, nonRetryableErrorTypes: NON_RETRYABLE },
      }),
    verify: verifyLocally
      ? localActivity('verifyAttempt', { ...local, startToCloseTimeout: '20 minutes', retry: { maximumAttempts: 2, nonRetryableErrorTypes: NON_RETRYABLE } })
      : remote.verify,
    verifyThenTeardown: verifyLocally
      ? localActivity('verifyThenTeardown', {
          ...local,
          startToCloseTimeout: '22 minutes',
          retry: { maximumAttempts: 2, nonRetryableErrorTypes: NON_RETRYABLE },
        })
      : remote.verifyThenTeardown,
    teardown: localActivity('teardownSandbox', { ...local, startToCloseTimeout: '2 minutes', retry: { maximumAttempts: 5, initialInterval: '1 second' } }),
    restoreTurns: remote.restoreTurns,
    // Regular activity: a harness runs far longer than a workflow task may stay open (see LONGEST_LOCAL_VERIFY_SEC).
    harness: remote.harness,
  };
}
