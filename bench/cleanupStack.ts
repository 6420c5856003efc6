/**
 * Undo steps for what a benchmark section started (servers, worker hosts, sandboxes, namespaces,
 * cgroups), run last-in first-out when the section ends, fails, or is interrupted: on SIGINT or
 * SIGTERM the steps run and the process exits 130 / 143. Each step runs once, and a step that
 * throws does not stop the ones after it.
 */

type Step = { what: string; undo: () => Promise<void> | void };

export class CleanupStack {
  private readonly steps: Step[] = [];
  private running: Promise<void> | undefined;
  private interrupted = false;
  // Stays registered until the steps are done: a second signal (a Ctrl-C reaches tsx's parent
  // process too, which relays it) must not find the process without a handler and end it mid-cleanup.
  private readonly onSignal = (signal: NodeJS.Signals): void => {
    if (this.interrupted) return;
    this.interrupted = true;
    process.stderr.write(`\n${signal}: stopping what the benchmark started (${this.steps.length} steps)...\n`);
    void this.run().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  };

  constructor() {
    process.on('SIGINT', this.onSignal);
    process.on('SIGTERM', this.onSignal);
  }

  /** Adds a step; the function returned runs it now (once) and takes it off the stack. */
  push(what: string, undo: () => Promise<void> | void): () => Promise<void> {
    const step: Step = { what, undo };
    this.steps.push(step);
    return async () => {
      const i = this.steps.indexOf(step);
      if (i < 0) return;
      this.steps.splice(i, 1);
      await step.undo();
    };
  }

  /** Runs every step, newest first; failures are reported on stderr, not thrown. */
  run(): Promise<void> {
    this.running ??= (async () => {
      for (let step = this.steps.pop(); step; step = this.steps.pop()) {
        try {
          await step.undo();
        } catch (err) {
          process.stderr.write(`cleanup: ${step.what} failed: ${err instanceof Error ? err.message : String(err)}\n`);
        }
      }
      process.off('SIGINT', this.onSignal);
      process.off('SIGTERM', this.onSignal);
    })();
    return this.running;
  }
}
