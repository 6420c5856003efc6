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
import { ClassifiedError } from '../../../shared/failures.js';

const run = promisify(execFile);
const TOOL_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
export const DISK_LAYER_FILE = 'rw.img';

export type WritableLayer = 'tmpfs' | 'disk';

/** Where image sandboxes keep their writable layer on this host (ROLLOUT_WRITABLE_LAYER, default disk). */
export function writableLayerSetting(env: NodeJS.ProcessEnv = process.env): WritableLayer {
  const value = env.ROLLOUT_WRITABLE_LAYER ?? 'disk';
  if (value !== 'disk' && value !== 'tmpfs') {
    throw new ClassifiedError('infra', 'capability_missing', `ROLLOUT_WRITABLE_LAYER=${value}: not a writable layer. Fix: set it to disk (an ext4 file per sandbox, as Docker's layer) or tmpfs (memory, counted against the sandbox's memory limit)`);
  }
  return value;
}

async function tool(file: string, args: string[]): Promise<string> {
  try {
    return (await run(file, args, { env: { PATH: TOOL_PATH, LANG: 'C' } })).stdout.trim();
  } catch (err) {
    const e = err as { code?: string; stderr?: string; message: string };
    const why = e.code === 'ENOENT' ? `${file} is not installed` : (e.stderr?.trim() || e.message);
    throw new ClassifiedError('infra', 'capability_missing', `the sandbox's writable layer on disk: ${file} ${args.join(' ')} failed: ${why}. Fix: install util-linux and e2fsprogs and make loop devices available (modprobe loop), or set ROLLOUT_WRITABLE_LAYER=tmpfs`);
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
  const left = devices.length > 0 ? await attached() : [];
  if (left.length > 0) throw new ClassifiedError('infra', 'capability_missing', `the sandbox's writable layer ${image} is still attached to ${left.join(', ')} after losetup --detach. Fix: check what holds it (losetup --list) and detach it`);
  return devices;
}
