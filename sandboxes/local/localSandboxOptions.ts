/** What a local sandbox provider is configured with: its options, and the settings it reads from the environment. */
import type { WritableLayer } from './diskLayer.js';
import type { HostPrograms } from './hostCapabilities.js';
import type { SandboxPoolOptions } from './pool/sandboxPool.js';
import { SPAWN_VIA, type SpawnVia } from './sandboxSpawner.js';

export interface LocalSandboxProviderOptions {
  /** Where sandbox state directories and records live. */
  stateRoot?: string;
  programs?: Partial<HostPrograms>;
  /** cgroup filesystem root; tests point it elsewhere to exercise the rlimit fallback. */
  cgroupRoot?: string;
  /** Writable layer size when the spec sets no diskMb. */
  defaultDiskMb?: number;
  /** Where an image sandbox's writable layer lives (diskLayer.ts); default ROLLOUT_WRITABLE_LAYER, else disk. */
  writableLayer?: WritableLayer;
  defaultExecTimeoutMs?: number;
  defaultMaxOutputBytes?: number;
  /** Largest file writeFile accepts and readFile returns by default. */
  maxFileBytes?: number;
  provisionTimeoutMs?: number;
  /**
   * Where sandbox commands are spawned: 'broker' (default), a small process forked on first use, so a
   * spawn does not fork this whole worker; 'worker', this process. Env ROLLOUT_SANDBOX_SPAWN.
   */
  spawnVia?: SpawnVia;
  /**
   * The compiled helper that enters a sandbox and launches one in one program start
   * (scripts/ensure-exec-helper.sh). Default: ROLLOUT_EXEC_HELPER; null: the program chain.
   */
  execHelper?: string | null;
  /** Where the provider says what it could not do as configured (once); default: a line on stderr. */
  notice?: (message: string) => void;
  /**
   * Sandboxes provisioned ahead of demand (pool/sandboxPool.ts): at most `max` ready at once, per shape
   * as many as were provisioned in the last `windowMs`. Default: ROLLOUT_SANDBOX_POOL_MAX (unset: 0, off).
   */
  pool?: SandboxPoolOptions;
}

export const DEFAULT_STATE_ROOT = '/var/lib/rollout-pipeline/sandboxes';

export function poolFromEnv(): SandboxPoolOptions {
  const value = process.env.ROLLOUT_SANDBOX_POOL_MAX;
  if (value === undefined || value === '') return { max: 0 };
  const max = Number(value);
  if (!Number.isInteger(max) || max < 0) throw new Error(`ROLLOUT_SANDBOX_POOL_MAX=${JSON.stringify(value)}: give how many ready sandboxes to keep at most, a whole number >= 0 (0 or unset: no pool)`);
  return { max };
}

export function spawnViaFromEnv(): SpawnVia {
  const value = process.env.ROLLOUT_SANDBOX_SPAWN;
  if (value === undefined || value === '') return 'broker';
  if ((SPAWN_VIA as readonly string[]).includes(value)) return value as SpawnVia;
  throw new Error(`ROLLOUT_SANDBOX_SPAWN=${JSON.stringify(value)}: use one of ${SPAWN_VIA.join(', ')} (or unset it for broker)`);
}
