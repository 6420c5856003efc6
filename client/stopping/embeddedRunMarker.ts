/**
 * `<data-dir>/embedded-run.json`: which process runs an embedded batch on this
 * data directory. Written when the run starts, removed when it stops cleanly;
 * a marker left by a process that no longer exists means that run was cut
 * short (second Ctrl-C, SIGKILL, crash) and its groups are still open in
 * `temporal.sqlite`: the next embedded start cancels them, and their
 * teardowns remove the sandboxes.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { holderAlive, HolderSchema, thisProcess } from '../../sandboxes/local/holderProcess.js';

/** `address`: the run's Temporal server, so that commands reading a batch meanwhile ask it (markers before it have none). */
const MarkerSchema = z.object({ process: HolderSchema, batchId: z.string(), startedAt: z.string(), address: z.string().optional() });
export type EmbeddedRunMarker = z.infer<typeof MarkerSchema>;

function file(dataDir: string): string {
  return join(dataDir, 'embedded-run.json');
}

export function readMarker(dataDir: string): EmbeddedRunMarker | undefined {
  try {
    return MarkerSchema.parse(JSON.parse(readFileSync(file(dataDir), 'utf8')));
  } catch {
    return undefined;
  }
}

/** The marker of another embedded run that still runs on this data directory, if any. */
export function liveRun(dataDir: string): EmbeddedRunMarker | undefined {
  const marker = readMarker(dataDir);
  return marker && holderAlive(marker.process) ? marker : undefined;
}

export function writeMarker(dataDir: string, batchId: string, address: string): void {
  writeFileSync(file(dataDir), JSON.stringify({ process: thisProcess(), batchId, startedAt: new Date().toISOString(), address }));
}

export function removeMarker(dataDir: string): void {
  rmSync(file(dataDir), { force: true });
}
