/**
 * The teardown of an attempt's sandbox, the one way both placements do it: never cancelled (an
 * operator's cancel stops the attempt, not the cleanup), and a teardown that keeps failing leaves
 * the sandbox to the reaper instead of failing the attempt.
 */
import { CancellationScope, log } from '@temporalio/workflow';
import type { ProvisionOutput } from '../../activities/contract.js';
import type { HostCalls } from './hostCalls.js';

/** Resolves with the teardown's time (0 when it failed and the reaper will do it). */
export function tearDownSandbox(host: HostCalls, p: ProvisionOutput, trajectoryRef: string, attempt: number): Promise<number> {
  return CancellationScope.nonCancellable(async () => {
    try {
      return (await host.teardown(`teardown sandbox ${p.handle.id}`, { handle: p.handle, trajectoryRef, attempt })).teardownMs;
    } catch (err) {
      // The host is gone or teardown kept failing: the reaper removes the sandbox from its record.
      log.warn('teardown failed; the reaper will remove the sandbox', { sandbox: p.handle.id, error: String(err) });
      return 0;
    }
  });
}
