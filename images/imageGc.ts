/**
 * What the image cache holds and its cleanup: `rollout env gc` removes task
 * images (podman image + extracted root filesystem) unused for a while and
 * not under a live sandbox, then base images no remaining task image was
 * built on, then podman's dangling layers; disk use is reported before and after.
 */
import { existsSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { BaseImage } from './baseImage.js';
import { cleanStorage } from './buildStorage.js';
import { runTool, type ImageTools } from './imageTools.js';
import type { TaskImage } from './taskImage.js';
import { pidsWhere } from '../shared/hostProcesses.js';

export interface CachedImage {
  image: TaskImage;
  lastUsed: Date;
  inUse: boolean;
}

export interface DiskUse {
  /** Extracted root filesystems (the sandboxes' lower layers). */
  rootfsBytes: number;
  /** podman's storage: images and build layers. */
  storageBytes: number;
  wheelBytes: number;
  taskImages: number;
  baseImages: number;
}

async function duBytes(tools: ImageTools, path: string): Promise<number> {
  if (!existsSync(path)) return 0;
  const r = await runTool(tools, 'du', ['-sb', '--one-file-system', path]);
  return Number(r.stdout.split('\t')[0]) || 0;
}

function graphRoot(tools: ImageTools): string {
  const conf = readFileSync(tools.env.CONTAINERS_STORAGE_CONF as string, 'utf8');
  return /graphroot\s*=\s*"([^"]+)"/.exec(conf)?.[1] ?? '/var/lib/containers/storage';
}

/** Lower directories of every overlay mounted in any mount namespace of the host (sandboxes mount theirs privately). */
function overlayLowers(): Set<string> {
  const seen = new Set<string>();
  const lowers = new Set<string>();
  // One process per mount namespace is read (pidsWhere skips the ones gone meanwhile).
  pidsWhere((pid) => {
    const ns = readlinkSync(`/proc/${pid}/ns/mnt`);
    if (seen.has(ns)) return false;
    seen.add(ns);
    for (const m of readFileSync(`/proc/${pid}/mountinfo`, 'utf8').matchAll(/lowerdir=([^,\s]+)/g)) for (const l of (m[1] as string).split(':')) lowers.add(l);
    return true;
  });
  return lowers;
}

export function cachedImages(tools: ImageTools): CachedImage[] {
  const dir = join(tools.cacheDir, 'tasks');
  if (!existsSync(dir)) return [];
  const lowers = overlayLowers();
  const out: CachedImage[] = [];
  for (const key of readdirSync(dir)) {
    const record = join(dir, key, 'image.json');
    if (!existsSync(record)) continue;
    const image = JSON.parse(readFileSync(record, 'utf8')) as TaskImage;
    out.push({ image, lastUsed: statSync(record).mtime, inUse: lowers.has(image.rootfs) });
  }
  return out;
}

export function cachedBases(tools: ImageTools): BaseImage[] {
  const dir = join(tools.cacheDir, 'bases');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as BaseImage);
}

export async function diskUse(tools: ImageTools): Promise<DiskUse> {
  const images = cachedImages(tools);
  let rootfsBytes = 0;
  for (const i of images) rootfsBytes += await duBytes(tools, i.image.rootfs);
  return {
    rootfsBytes,
    storageBytes: await duBytes(tools, graphRoot(tools)),
    wheelBytes: await duBytes(tools, join(tools.cacheDir, 'wheels')),
    taskImages: images.length,
    baseImages: cachedBases(tools).length,
  };
}

export interface GcReport {
  removedImages: string[];
  removedBases: string[];
  kept: string[];
  /** Working containers dead builds left in podman's storage, removed (none on a dry run). */
  leftoverContainers: string[];
  before: DiskUse;
  after: DiskUse;
}

/** Removes one task image: podman's copy and the extracted root filesystem with its record. */
export async function removeTaskImage(tools: ImageTools, image: TaskImage): Promise<void> {
  await runTool(tools, 'podman', ['rmi', '--force', image.tag]);
  rmSync(join(tools.cacheDir, 'tasks', image.key), { recursive: true, force: true });
}

export async function gcImages(tools: ImageTools, options: { unusedForMs: number; dryRun: boolean }): Promise<GcReport> {
  const before = await diskUse(tools);
  // Waits for builds running now to finish: whatever working containers are left then are dead builds'.
  const leftoverContainers = options.dryRun ? [] : (await cleanStorage(tools, (file, args) => runTool(tools, file, args))).containers;
  const removedImages: string[] = [];
  const kept: string[] = [];
  const now = Date.now();
  for (const c of cachedImages(tools)) {
    if (c.inUse || now - c.lastUsed.getTime() < options.unusedForMs) {
      kept.push(`${c.image.tag}${c.inUse ? ' (under a live sandbox)' : ''}`);
      continue;
    }
    removedImages.push(c.image.tag);
    if (!options.dryRun) await removeTaskImage(tools, c.image);
  }
  const stillUsed = new Set(cachedImages(tools).flatMap((c) => c.image.bases.map((b) => b.baseImage)));
  const removedBases: string[] = [];
  for (const base of cachedBases(tools)) {
    if (stillUsed.has(base.tag)) continue;
    removedBases.push(base.tag);
    if (options.dryRun) continue;
    await runTool(tools, 'podman', ['rmi', '--force', base.tag]);
    rmSync(join(tools.cacheDir, 'bases', `${base.recipeHash}.json`), { force: true });
  }
  if (!options.dryRun) await runTool(tools, 'podman', ['image', 'prune', '--force']);
  return { removedImages, removedBases, kept, leftoverContainers, before, after: options.dryRun ? before : await diskUse(tools) };
}
