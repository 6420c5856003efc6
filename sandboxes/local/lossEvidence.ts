/**
 * How a local sandbox found gone ended, from what only the host holds: its
 * record (gone after a teardown), its cgroup's OOM kills, and the status the
 * launcher wrote when bwrap returned. The init ignores every signal it could
 * handle and the kernel drops the rest when they come from inside its pid
 * namespace, so an init killed by a signal was killed from the host; one
 * that exited did so because of something inside.
 */
import { readFile } from 'node:fs/promises';
import { constants as osConstants } from 'node:os';
import { join } from 'node:path';
import type { SandboxHandle, SandboxLossEvidence } from '../../shared/sandbox.js';
import { cgroupOomKills } from './cgroups.js';
import { sleep, type LocalSandboxContext } from './localSandboxContext.js';
import { INIT_EXIT_FILE } from './sandboxScripts.js';

export async function sandboxLossEvidence(ctx: LocalSandboxContext, handle: SandboxHandle): Promise<SandboxLossEvidence> {
  const record = await ctx.registry.get(handle.id);
  let oomKills: number | null = null;
  for (const dir of record?.cgroupDirs ?? []) {
    const k = await cgroupOomKills(dir);
    if (k !== null) oomKills = (oomKills ?? 0) + k;
  }
  const exitFile = join(ctx.registry.stateDir(handle.id), INIT_EXIT_FILE);
  let status: number | null = null;
  // The launcher writes the status once bwrap has returned, a moment after the init is gone (the
  // compiled helper creates the file empty at launch; the program chain only then).
  for (let i = 0; i < 100 && record && status === null; i++) {
    try {
      const text = (await readFile(exitFile, 'utf8')).trim();
      if (/^\d+$/.test(text)) status = Number(text);
    } catch {
      // not written yet
    }
    if (status === null) await sleep(20);
  }
  const SIGKILLED = 128 + osConstants.signals.SIGKILL;
  const initEnd: SandboxLossEvidence['initEnd'] = status === null ? null : status === SIGKILLED ? { kind: 'signal', signal: 'SIGKILL' } : { kind: 'exit', status };
  return { tornDownByHost: record === undefined, oomKills, initEnd };
}
