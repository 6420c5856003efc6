/**
 * The writable layer of an image sandbox on disk, as Docker's overlay2 keeps a container's: a sparse
 * ext4 file of the sandbox's disk size in its state directory (rw.img), attached to a loop device that
 * the launcher mounts, in the sandbox's private mount namespace, under the overlay's upper layer.
 *
 * Why: a tmpfs layer's pages are memory, charged to the sandbox's memory cgroup and never written back,
 * so an install bigger than the task's memory limit was OOM-killed (torch-tensor-parallelism, an apt
 * install inside a 2 GB limit) where Docker's disk-backed layer only fills page cache, which the
 * kernel reclaims. The file's size is the sandbox's disk limit (ENOSPC past it); a sparse file takes
 * host disk only as the sandbox writes. ROLLOUT_WRITABLE_LAYER=tmpfs keeps the old layer.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ClassifiedError } from '../../shared/failures.js';

const run = promisify(execFile);
const TOOL_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
export const DISK_LAYER_FILE = 'rw.img';

export type WritableLayer = 'tmpfs' | 'disk';

/** Where image sandboxes keep their writable layer on this host (ROLLOUT_WRITABLE_LAYER, default disk). */
export function writableLayerSetting(env: NodeJS.ProcessEnv = process.env): WritableLayer {
  const value = env.ROLLOUT_WRITABLE_LAYER ?? 'disk';
  if (value !== 'disk' && value !== 'tmpfs') {
    throw new ClassifiedError(
      'infra',
      'capability_missing',
      `ROLLOUT_WRITABLE_LAYER=${value}: not a writable layer. Fix: set it to disk (an ext4 file per sandbox, as Docker's layer) or tmpfs (memory, counted against the sandbox's memory limit)`,
    );
  }
  return value;
}

async function tool(file: string, args: string[]): Promise<string> {
  try {
    return (await run(file, args, { env: { PATH: TOOL_PATH, LANG: 'C' } })).stdout.trim();
  } catch (err) {
    const e = err as { code?: string; stderr?: string; message: string };
    const why = e.code === 'ENOENT' ? `${file} is not installed` : (e.stderr?.trim() || e.message);
    throw new ClassifiedError(
      'infra',
      'capability_missing',
      `the sandbox's writable layer on disk: ${file} ${args.join(' ')} failed: ${why}. Fix: install util-linux and e2fsprogs and make loop devices available (modprobe loop), or set ROLLOUT_WRITABLE_LAYER=tmpfs`,
    );
  }
}

/** Makes the layer's file and attaches it: returns the loop device the launcher mounts. */
export async function createDiskLayer(stateDir: string, sizeMb: number): Promise<string> {
  const image = join(stateDir, DISK_LAYER_FILE);
  await tool('truncate', ['-s', `${sizeMb}M`, image]);
  // No journal and no reserved blocks: scratch space that dies with the sandbox, all of it the sandbox's.
  await tool('mkfs.ext4', ['-q', '-F', '-O', '^has_journal', '-m', '0', '-E', 'lazy_itable_init=1,nodiscard', image]);
  return tool('losetup', ['--find', '--show', image]);
}

/**
 * Detaches every loop device backed by the sandbox's layer file (found by the file, never by a device
 * name that another sandbox may have been given since). Returns the devices detached.
 */
export async function releaseDiskLayer(stateDir: string): Promise<string[]> {
  const image = join(stateDir, DISK_LAYER_FILE);
  if (!existsSync(image)) return [];
  const attached = async (): Promise<string[]> =>
    (await tool('losetup', ['--list', '--noheadings', '--output', 'NAME', '--associated', image]).catch(() => ''))
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean);
  const devices = await attached();
  // A teardown running at the same time may detach one first: only a device still attached afterwards is an error.
  for (const device of devices) await tool('losetup', ['--detach', device]).catch(() => undefined);
  // A device whose filesystem a process of the sandbox still holds (one still exiting, under load) is only
  // marked to detach when the last holder lets go: wait for that a little before calling it stuck.
  let left = devices.length > 0 ? await attached() : [];
  for (let waitMs = 50; left.length > 0 && waitMs <= 1600; waitMs *= 2) {
    await new Promise((resolve) => setTimeout(resolve, waitMs));
    left = await attached();
  }
  if (left.length > 0)
    throw new ClassifiedError(
      'infra',
      'capability_missing',
      `the sandbox's writable layer ${image} is still attached to ${left.join(', ')} after losetup --detach. Fix: check what holds it (losetup --list) and detach it`,
    );
  return devices;
}

/** A loop device and the file behind it, as `losetup --list` names them. */
export interface AttachedLayer {
  device: string;
  backingFile: string;
}

/** `losetup --list --raw` escapes blanks and backslashes in a file name as \xNN. */
function unescapeRaw(field: string): string {
  return field.replace(/\\x([0-9a-fA-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}

/**
 * Loop devices still attached to a sandbox's layer file (`sbx-<id>/rw.img`) that was deleted: what a sandbox leaves when its state
 * directory is removed without a teardown (a test's scratch removed after a timeout, `rm -rf` by hand).
 * Nothing can open a deleted file again, so such a device serves no one but a sandbox already gone;
 * the kernel marks the name " (deleted)".
 */
const STRAY_LAYER = new RegExp(`/sbx-[^/]+/${DISK_LAYER_FILE.replace('.', '\\.')} \\(deleted\\)$`);

export function strayLayers(losetupList: string): AttachedLayer[] {
  const strays: AttachedLayer[] = [];
  for (const line of losetupList.split('\n')) {
    const [device, file] = line.trim().split(/\s+/, 2);
    if (device === undefined || file === undefined) continue;
    const backingFile = unescapeRaw(file);
    // Only a sandbox's own layer (a state directory named by its sandbox id): another program's loop devices are not ours to touch.
    if (STRAY_LAYER.test(backingFile)) strays.push({ device, backingFile });
  }
  return strays;
}

/**
 * Detaches the loop devices of deleted layer files (strayLayers). A device still mounted somewhere is
 * detached once the last mount goes (the kernel's autoclear), so this never pulls a layer from under a
 * live mount. Returns what it detached.
 */
export async function detachStrayLayers(): Promise<AttachedLayer[]> {
  const list = await tool('losetup', ['--list', '--noheadings', '--raw', '--output', 'NAME,BACK-FILE']).catch(() => '');
  const strays = strayLayers(list);
  const detached: AttachedLayer[] = [];
  for (const stray of strays) {
    if (await tool('losetup', ['--detach', stray.device]).then(() => true, () => false)) detached.push(stray);
  }
  return detached;
}
