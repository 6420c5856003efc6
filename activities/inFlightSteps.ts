/**
 * One run per step key in this worker process. A step (a policy turn, a tool call) can be asked for a
 * second time while its first run is still going in the same process: a local activity whose workflow
 * task timed out under load runs again when the attempt's history is replayed, and a retried activity
 * can land on the worker that still runs the first try. Starting it again would ask the model twice
 * or run a command twice (an `echo >> log` appended twice); instead the second caller waits for the
 * first run and takes its result. A first run that failed (or was cancelled) does not answer for the
 * second: that one runs itself.
 */
export class InFlightSteps {
  private readonly running = new Map<string, Promise<unknown>>();

  async run<T>(key: string, step: () => Promise<T>): Promise<T> {
    const earlier = this.running.get(key) as Promise<T> | undefined;
    if (earlier) {
      try {
        return await earlier;
      } catch {
        // the first run failed: this caller runs the step itself below
      }
    }
    const current = step();
    this.running.set(key, current);
    try {
      return await current;
    } finally {
      if (this.running.get(key) === current) this.running.delete(key);
    }
  }

  /** Steps running now (for tests and diagnostics). */
  get size(): number {
    return this.running.size;
  }
}
