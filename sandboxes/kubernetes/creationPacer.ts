/**
 * Spaces pod creations so one worker never sends the API server more than
 * `perSecond` creates per second, however many rollouts provision at once.
 */
export class CreationPacer {
  private next = 0;

  constructor(private readonly perSecond: number) {
    if (!(perSecond > 0)) throw new Error(`pod creations per second must be positive, got ${perSecond}`);
  }

  /** Resolves when this caller may create; callers are served in order. */
  async wait(): Promise<void> {
    const now = Date.now();
    const at = Math.max(now, this.next);
    this.next = at + 1000 / this.perSecond;
    if (at > now) await new Promise((r) => setTimeout(r, at - now));
  }
}
