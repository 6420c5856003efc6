/**
 * Long activities (tool calls, verification) heartbeat while they work, so a
 * worker that dies mid-command is noticed within the heartbeat timeout (not
 * after the whole start-to-close timeout) and the call is retried on a live
 * worker; and so a cancelled rollout's activity learns of it and stops.
 */
import { Context } from '@temporalio/activity';

export const HEARTBEAT_EVERY_MS = 2_000;

/** Runs `work` with a heartbeat every few seconds and the activity's cancellation signal (none outside an activity). */
export async function withHeartbeats<T>(work: (signal: AbortSignal | undefined) => Promise<T>): Promise<T> {
  let context: Context;
  try {
    context = Context.current();
  } catch {
    return work(undefined); // not inside an activity (the CLI's replay, a unit test)
  }
  // A local activity has no heartbeat (its workflow task's timeout notices a dead worker; core would
  // refuse each one with a warning), and it runs to its end: its worker cancels it also when it evicts
  // the workflow (a workflow task that timed out under load), not only when the rollout asks. Cut
  // there, a command could have done its work without its record; the replay would run it again (an
  // `echo >> log` twice: a wrong reward). Run to the end, the step records what it did, and the
  // replay's call of the same step waits for it in this process (inFlightSteps.ts) and takes that.
  // An operator's cancel of such an attempt waits for the running call to end.
  if (context.info.isLocal) return work(undefined);
  context.heartbeat();
  const timer = setInterval(() => context.heartbeat(), HEARTBEAT_EVERY_MS);
  try {
    return await work(context.cancellationSignal);
  } finally {
    clearInterval(timer);
  }
}
