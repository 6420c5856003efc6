/**
 * Runs on a sandbox host's queue beside an attempt that runs there (group.attemptOn 'host') and
 * heartbeats until the rollout cancels it. An attempt workflow whose host died waits for a worker
 * with no timeout of its own; this activity is how the rollout notices: its heartbeats stop (a
 * restarted worker of the host takes it up again) or nobody picks it up within its schedule-to-start
 * timeout (the host is gone), and the rollout starts a fresh attempt elsewhere.
 */
import { Context } from '@temporalio/activity';
import { HEARTBEAT_EVERY_MS } from './heartbeats.js';

export interface WatchHostInput {
  /** The attempt workflow watched over (for logs and the Web UI). */
  attemptWorkflowId: string;
}

/** Never returns on its own: it ends when the rollout cancels it (or fails when its worker stops). */
export async function watchHost(_input: WatchHostInput): Promise<void> {
  const context = Context.current();
  context.heartbeat();
  const timer = setInterval(() => context.heartbeat(), HEARTBEAT_EVERY_MS);
  try {
    await context.cancelled;
  } finally {
    clearInterval(timer);
  }
}
