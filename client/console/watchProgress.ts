/** Polls a batch's group states and shows them until stopped; the last poll is drawn for good. */
import type { GroupState } from './groupState.js';
import type { ProgressDisplay } from './progressDisplay.js';

export interface ProgressWatch {
  /** Stops polling, draws the final state and returns it. */
  stop(): Promise<readonly GroupState[]>;
}

export function watchProgress(display: ProgressDisplay, poll: () => Promise<GroupState[]>, everyMs: number): ProgressWatch {
  let last: readonly GroupState[] = [];
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let inFlight: Promise<void> = Promise.resolve();
  const tick = (): void => {
    inFlight = poll()
      .then((groups) => {
        last = groups;
        if (!stopped) display.show(groups);
      })
      // A poll that fails (the server restarting, a query timing out) is skipped; the next one tries again.
      .catch(() => undefined)
      .finally(() => {
        if (!stopped) timer = setTimeout(tick, everyMs);
      });
  };
  tick();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await inFlight;
      last = await poll().catch(() => last);
      display.finish(last);
      return last;
    },
  };
}
