/**
 * Podman's container storage under the image cache, shared by every build of
 * the host. A `podman build` works in storage-only "working containers"
 * (buildah's, state `storage`) with their overlay mounts; one killed mid-build
 * leaves them behind, and podman records nothing that says which build made
 * them. So every use of the storage that makes containers or mounts (a build,
 * an image mount and the copy out of it) holds a shared lock, and cleaning
 * takes it exclusively: whoever gets it knows no build runs anywhere on the
 * host, and every working container and image mount left is a dead build's.
 *
 * Cleaning is asked for (a marker file) whenever a dead owner's build record
 * is found (buildProcesses.ts) and tried without waiting: at a process's first
 * build tool, and after each build that held the storage. `rollout env gc`
 * waits for the exclusive lock and cleans in any case.
 */
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tryExclusiveFileLock, withFileLock } from './fileLock.js';

/** What storage cleaning needs of the image tools (imageTools.ts's ImageTools): where the builder keeps its locks. */
interface StorageTools {
  cacheDir: string;
}

/** Runs one podman command with the image tools' settings (imageTools.ts's runTool, bound to them). */
type Run = (file: string, args: string[]) => Promise<{ code: number; stdout: string }>;

export interface StorageCleaning {
  /** Working containers of dead builds removed (with their mounts). */
  containers: string[];
  /** Whether image mounts were released. */
  imageMountsReleased: boolean;
}

function lockFile(cacheDir: string): string {
  return join(cacheDir, 'locks', 'podman-storage.lock');
}

function dirtyMarker(cacheDir: string): string {
  return join(cacheDir, 'running', 'storage-needs-cleaning');
}

/** Runs `fn` while it may make containers and mounts in the storage (shared: builds run side by side). */
export async function withBuildStorage<T>(tools: StorageTools, run: Run, fn: () => Promise<T>): Promise<T> {
  try {
    return await withFileLock(lockFile(tools.cacheDir), fn, undefined, 'shared');
  } finally {
    if (existsSync(dirtyMarker(tools.cacheDir))) await cleanStorageIfIdle(tools, run);
  }
}

/** Asks for the storage to be cleaned as soon as no build holds it. */
export function markStorageForCleaning(cacheDir: string): void {
  try {
    mkdirSync(join(cacheDir, 'running'), { recursive: true });
    writeFileSync(dirtyMarker(cacheDir), `${new Date().toISOString()}\n`);
  } catch {
    // the next gc still cleans
  }
}

/** Cleans now if no build holds the storage; undefined when one does (the marker stays for the next try). */
export async function cleanStorageIfIdle(tools: StorageTools, run: Run): Promise<StorageCleaning | undefined> {
  const done = await tryExclusiveFileLock(lockFile(tools.cacheDir), () => clean(tools, run));
  return done?.value;
}

/** Waits until no build holds the storage, then cleans (rollout env gc). */
export async function cleanStorage(tools: StorageTools, run: Run, onWait?: () => void): Promise<StorageCleaning> {
  return withFileLock(lockFile(tools.cacheDir), () => clean(tools, run), onWait);
}

/** Only under the exclusive lock: every storage-only container and image mount is a dead build's. */
async function clean(tools: StorageTools, run: Run): Promise<StorageCleaning> {
  const listed = await run('podman', ['ps', '--all', '--external', '--format', 'json']);
  if (listed.code !== 0) return { containers: [], imageMountsReleased: false };
  const all = JSON.parse(listed.stdout || '[]') as { Id: string; Names?: string[]; State?: string }[];
  const working = all.filter((c) => c.State === 'storage');
  const containers: string[] = [];
  for (const c of working) {
    // --storage: a container podman itself does not manage (buildah's working container), with its mount.
    const removed = await run('podman', ['rm', '--force', '--storage', c.Id]);
    if (removed.code === 0) containers.push(c.Names?.[0] ?? c.Id.slice(0, 12));
  }
  const unmounted = await run('podman', ['image', 'unmount', '--all', '--force']);
  rmSync(dirtyMarker(tools.cacheDir), { force: true });
  return { containers, imageMountsReleased: unmounted.code === 0 };
}
