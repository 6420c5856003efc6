/**
 * Which worker process holds a local sandbox: its pid, its start time (a
 * recycled pid is another process) and the host's boot id (after a reboot no
 * process of the old boot exists). Written into the sandbox's record when it
 * is provisioned and when another process takes it over (a restarted worker
 * re-attaching), so a reaper without a Temporal server can still tell a
 * sandbox a live worker holds from one whose worker is gone.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { isSameProcess, processStartTime } from './procfs.js';

export const HolderSchema = z.object({
  pid: z.number().int().positive(),
  startTime: z.string(),
  bootId: z.string(),
});
export type Holder = z.infer<typeof HolderSchema>;

let currentBootId: string | undefined;

/** The kernel's id of this boot (changes on every reboot). */
export function bootId(): string {
  currentBootId ??= readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  return currentBootId;
}

let self: Holder | undefined;

/** This process, as a holder. */
export function thisProcess(): Holder {
  self ??= { pid: process.pid, startTime: processStartTime(process.pid) ?? '', bootId: bootId() };
  return self;
}

export function isThisProcess(holder: Holder): boolean {
  const me = thisProcess();
  return holder.pid === me.pid && holder.startTime === me.startTime && holder.bootId === me.bootId;
}

/** Whether the holder still runs: same boot, and its pid is the same process. */
export function holderAlive(holder: Holder): boolean {
  return holder.bootId === bootId() && isSameProcess(holder.pid, holder.startTime);
}
