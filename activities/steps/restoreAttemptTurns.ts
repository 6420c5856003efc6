/**
 * restoreTurns (failurePolicy.resume 'replay'): brings a fresh sandbox to where an earlier attempt's
 * last finished turn left its own, by replaying its tool calls, and takes those turns over into this
 * attempt (resume/restoreTurns.ts). Heartbeats while it replays.
 */
import { activityLog } from '../activityLog.js';
import { withHeartbeats } from '../heartbeats.js';
import { restoreTurns, type RestoreTurnsInput, type RestoreTurnsOutput } from '../../resume/restoreTurns.js';
import type { ActivityContext } from './activityContext.js';

export function restoreAttemptTurns({ deps }: ActivityContext, input: RestoreTurnsInput): Promise<RestoreTurnsOutput> {
  return withHeartbeats(async (signal) => {
    const out = await restoreTurns(deps.provider, deps.store, input, signal);
    const log = activityLog(deps.logger, { trajectoryRef: input.trajectoryRef, attempt: input.toAttempt });
    if (out.status === 'restored')
      log.info(
        {
          fromAttempt: input.fromAttempt,
          turns: out.prefix.turns,
          replayedCalls: out.prefix.replayedCalls,
          replayMs: Math.round(out.prefix.replayMs),
          drift: out.prefix.drift,
        },
        'turns restored by replay',
      );
    else if (out.status === 'diverged') log.warn({ divergence: out.divergence }, 'the replay diverged: the attempt starts at turn 0');
    return out;
  });
}
