/**
 * What every lifecycle stage of the local provider (provision, exec,
 * teardown, pool) shares: the registry, the host's programs, how commands are
 * spawned and entered, and the errors they throw.
 */
import { readFile } from 'node:fs/promises';
import { ClassifiedError } from '../../shared/failures.js';
import type { WritableLayer } from './diskLayer.js';
import type { HostPrograms } from './hostCapabilities.js';
import type { SandboxRegistry } from './sandboxRegistry.js';
import type { SandboxSpawner } from './sandboxSpawner.js';

export interface LocalSandboxContext {
  readonly registry: SandboxRegistry;
  readonly programs: HostPrograms;
  readonly cgroupRoot: string;
  readonly host: string;
  /** The synthetic passwd, group, hosts and hostname bound into every sandbox. */
  readonly etcDir: string;
  readonly spawner: SandboxSpawner;
  /** The compiled helper (helper/), or null: the program chain. */
  readonly helper: string | null;
  readonly defaultDiskMb: number;
  /** Where an image sandbox's writable layer lives: an ext4 file on disk (as Docker's) or a tmpfs. */
  readonly writableLayer: WritableLayer;
  readonly provisionTimeoutMs: number;
  /** Sandboxes whose record names this process as holder (checked once per sandbox, not on every exec). */
  readonly claimed: Set<string>;
}

export type SandboxErrorType = 'provision_failed' | 'provision_timeout' | 'sandbox_lost' | 'exec_transport';

export function sandboxError(type: SandboxErrorType, message: string, cause?: unknown): ClassifiedError<'infra'> {
  return new ClassifiedError('infra', type, message, cause === undefined ? undefined : { cause });
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The end of a log file, for an error message ('' when it cannot be read). */
export async function readTail(file: string, max = 2000): Promise<string> {
  try {
    const text = (await readFile(file, 'utf8')).trim();
    return text.length > max ? `...${text.slice(-max)}` : text;
  } catch {
    return '';
  }
}

/** Teardown could not finish yet; the record stays on disk so a retry (or the reaper) completes it. */
export class TeardownIncompleteError extends Error {
  override readonly name = 'TeardownIncompleteError';
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
