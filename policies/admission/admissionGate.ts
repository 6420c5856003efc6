/**
 * Admission of policy calls by the inference server's own load, instead of a fixed rate: a call
 * goes to the server only while it has room, read from the server itself (inferenceLoad.ts).
 *   - KV cache: like prime-rl, new calls go while it is under `low` (60%), one per reading between
 *     `low` and `high`, and none from `high` (80%) until it is back under `low` (hysteresis);
 *   - requests the server has queued (waiting > 0): none until its queue is empty;
 *   - llama.cpp slots: no more calls than idle slots.
 * A server that reports no load (a generic endpoint) is not gated. A call waits at most `maxWaitMs`
 * and then goes anyway, with the reason it waited, so a server whose queue never empties (other
 * tenants) slows the pipeline down but never stops it. The wait is recorded on the turn and is
 * never part of the model's time. One gate per server per worker process: every call of the process
 * to that server shares its readings.
 */
import type { ServerKind } from '../../shared/tokens.js';
import { describeLoad, readInferenceLoad, type InferenceLoad } from './inferenceLoad.js';

export interface AdmissionSettings {
  mode: 'load' | 'off';
  /** KV cache fraction from which no new call is admitted. */
  kvHigh: number;
  /** KV cache fraction under which calls are admitted freely again. */
  kvLow: number;
  /** Longest a call waits for room, ms. */
  maxWaitMs: number;
}

export interface Admission {
  /** The server gated ("llama.cpp http://host:8080"). */
  server: string;
  /** Calls of this worker in flight to that server once this one was admitted. */
  inFlight: number;
  /** How long the call waited for room, ms (0 when it went at once). */
  waitedMs: number;
  /** The server's load when the call was admitted (null: it reports none). */
  load: InferenceLoad | null;
  /** Why it waited, when it did ("all 4 slots busy"); with `forced`, why it went without room. */
  heldBy?: string;
  /** It waited maxWaitMs and went without room. */
  forced?: boolean;
}

/** How often the server's load is read while calls wait. */
const READ_EVERY_MS = 250;

export class AdmissionGate {
  private load: InferenceLoad | null = null;
  private readAt = 0;
  private reading: Promise<void> | undefined;
  private admittedSinceRead = 0;
  private trimming = false;
  /** Calls of this process to this server now (admitted, not yet released). */
  inFlight = 0;

  constructor(
    private readonly root: string,
    private readonly kind: ServerKind,
    private readonly read: (root: string, kind: ServerKind) => Promise<InferenceLoad | null> = readInferenceLoad,
  ) {}

  /** The last reading of the server's load (for metrics and status). */
  lastLoad(): InferenceLoad | null {
    return this.load;
  }

  private async fresh(): Promise<void> {
    if (Date.now() - this.readAt < READ_EVERY_MS) return;
    this.reading ??= this.read(this.root, this.kind)
      .then((load) => {
        this.load = load;
        this.readAt = Date.now();
        this.admittedSinceRead = 0;
      })
      .finally(() => (this.reading = undefined));
    await this.reading;
  }

  /** Whether a call may go now; the reason it may not otherwise. */
  private room(settings: AdmissionSettings): true | string {
    const load = this.load;
    if (!load) return true;
    const kv = load.kvCacheUsage;
    if (kv !== null) {
      if (kv >= settings.kvHigh) this.trimming = true;
      else if (kv < settings.kvLow) this.trimming = false;
      if (this.trimming) return `KV cache ${Math.round(kv * 100)}% (at or past ${Math.round(settings.kvHigh * 100)}%, waiting for it under ${Math.round(settings.kvLow * 100)}%)`;
    }
    if (load.waiting !== null && load.waiting > 0) return `${load.waiting} request${load.waiting === 1 ? '' : 's'} already queued on the server`;
    if (load.slots) return load.slots.total - load.slots.busy - this.admittedSinceRead > 0 ? true : `all ${load.slots.total} slots busy`;
    if (kv !== null && kv >= settings.kvLow && this.admittedSinceRead >= 1) return `KV cache ${Math.round(kv * 100)}%: one new call per reading above ${Math.round(settings.kvLow * 100)}%`;
    return true;
  }

  /** Waits for room (or maxWaitMs) and counts the call in flight; release() when it is answered. */
  async admit(settings: AdmissionSettings, signal?: AbortSignal): Promise<Admission> {
    const started = Date.now();
    const server = `${this.kind} ${this.root}`;
    if (settings.mode === 'off') {
      this.inFlight++;
      return { server, inFlight: this.inFlight, waitedMs: 0, load: null };
    }
    let heldBy: string | undefined;
    for (;;) {
      signal?.throwIfAborted();
      await this.fresh();
      const verdict = this.room(settings);
      const waitedMs = Date.now() - started;
      if (verdict === true || waitedMs >= settings.maxWaitMs) {
        this.inFlight++;
        this.admittedSinceRead++;
        const forced = verdict !== true;
        if (forced) heldBy = verdict;
        return { server, inFlight: this.inFlight, waitedMs, load: this.load, ...(heldBy ? { heldBy } : {}), ...(forced ? { forced } : {}) };
      }
      heldBy = verdict;
      await new Promise<void>((resolve) => setTimeout(resolve, READ_EVERY_MS));
    }
  }

  /** The call was answered (or failed); returns the calls still in flight. */
  release(): number {
    this.inFlight = Math.max(0, this.inFlight - 1);
    return this.inFlight;
  }

  describe(): string {
    return `${this.inFlight} in flight from this worker · server ${describeLoad(this.load)}`;
  }
}

const gates = new Map<string, AdmissionGate>();

/** The gate of this worker process for the server at `root`. */
export function admissionGate(root: string, kind: ServerKind): AdmissionGate {
  const key = `${kind} ${root}`;
  let gate = gates.get(key);
  if (!gate) {
    gate = new AdmissionGate(root, kind);
    gates.set(key, gate);
  }
  return gate;
}

/** Every gate of this process (metrics). */
export function admissionGates(): ReadonlyMap<string, AdmissionGate> {
  return gates;
}
