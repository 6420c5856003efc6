/**
 * The digest of a local sandbox's state: every file the agent can have changed, read from the host.
 * That is the overlay's upper layer (the whole root of an image sandbox, the workdir of a host-base
 * one; a deleted file is a whiteout there) and the tmpfs mounts of a host-base sandbox (/tmp, /root,
 * /tests, /solution, /logs). Each entry counts by its path, type, permission bits, owner and content
 * (a symlink by its target); never by its times. Caches, logs and bytecode (VOLATILE_PATHS) are
 * digested apart: their content embeds the time they were made. Resume (resume/) compares the digest a
 * turn left in the original attempt with the one its replay leaves.
 *
 * Unchanged files are not read again: their content hash is kept by (device, inode, size, mtime,
 * ctime), which every write changes.
 *
 * The tree is the agent's: it is walked by descriptor, never following a link (rootedTree.ts; a
 * directory swapped for a link to the host's / is refused, not read), only regular files are read
 * (a FIFO, /dev/zero are named by type), and the walk is bounded: entries, bytes per file and bytes per
 * digest. Past a bound the digest says so (`tooLarge`) instead of spinning the worker until the
 * activity's timeout, and a replay to such a state restarts instead of resuming (resume/).
 */
import { createHash } from 'node:crypto';
import type { BigIntStats } from 'node:fs';
import { readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { isVolatilePath, type LocalSandboxHandle, type SandboxStateDigest } from '../../../shared/sandbox.js';
import { isLiveProcess, processStartTime } from '../procfs.js';
import { sandboxError, type LocalSandboxContext } from '../localSandboxContext.js';
import { OpenDir, TreeTooLargeError } from './rootedTree.js';

/** Most entries a digest walks, most bytes it reads of one file and in all (unchanged files are not read again). */
export const DIGEST_LIMITS = { entries: 200_000, fileBytes: 256 * 1024 * 1024, totalBytes: 1024 * 1024 * 1024 };

class DigestTooLarge extends Error {}

const EMPTY_SHA256 = createHash('sha256').digest('hex');

/** Where a host-base sandbox keeps writable files outside its overlay (bwrapArgs.ts). */
const HOST_BASE_TMPFS = ['/tmp', '/root', '/tests', '/solution', '/logs'];
/** Most areas a digest names (see SandboxStateDigest.areas); past it, areas are named one level up. */
const MAX_AREAS = 64;
/** Content hashes kept per provider; past it the cache starts over. */
const MAX_CACHED_HASHES = 200_000;

interface Root {
  /** Where the tree appears inside the sandbox. */
  mount: string;
  /** Where the host reads it. */
  hostPath: string;
}

export class StateDigester {
  private readonly hashes = new Map<string, string>();

  constructor(private readonly ctx: LocalSandboxContext) {}

  async digest(h: LocalSandboxHandle): Promise<SandboxStateDigest> {
    const record = await this.ctx.registry.get(h.id);
    if (!record?.handle || record.launcherPid === null) throw sandboxError('sandbox_lost', `sandbox ${h.id} has no record or launcher; it was torn down`);
    const launcherStart = processStartTime(record.launcherPid);
    if (launcherStart === undefined || !isLiveProcess(h.pid, h.pidStartTime))
      throw sandboxError('sandbox_lost', `sandbox ${h.id} is gone: its init (pid ${h.pid}) or launcher (pid ${record.launcherPid}) no longer runs`);
    const image = record.spec?.rootfs !== undefined;
    // The launcher's mount namespace holds the writable layer; the init's, the tmpfs mounts.
    const roots: Root[] = [{ mount: image ? '/' : h.workdir, hostPath: `/proc/${record.launcherPid}/root${join(record.stateDir, 'rw', 'upper')}` }];
    if (!image) for (const m of HOST_BASE_TMPFS) roots.push({ mount: m, hostPath: `/proc/${h.pid}/root${m}` });
    const entries: [string, string][] = [];
    const budget = { entries: 0, bytes: 0, read: 0 };
    let tooLarge: string | undefined;
    try {
      for (const root of roots) {
        let dir: OpenDir;
        try {
          dir = await OpenDir.openTrusted(root.hostPath);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
          throw err;
        }
        try {
          await this.walk(dir, root.mount, entries, budget);
        } finally {
          await dir.close();
        }
      }
    } catch (err) {
      if (!(err instanceof DigestTooLarge || err instanceof TreeTooLargeError)) throw err;
      tooLarge = err instanceof TreeTooLargeError ? `more than ${DIGEST_LIMITS.entries} entries` : err.message;
    }
    // The sandbox must still be the one asked about: a pid reused mid-walk would have shown another tree.
    if (processStartTime(record.launcherPid) !== launcherStart || !isLiveProcess(h.pid, h.pidStartTime)) throw sandboxError('sandbox_lost', `sandbox ${h.id} died while its state was read`);
    if (tooLarge) return { digest: 'too-large', areas: {}, files: budget.entries, bytes: budget.bytes, tooLarge };
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return summarize(entries, budget.bytes);
  }

  private async walk(dir: OpenDir, sandboxDir: string, out: [string, string][], budget: { entries: number; bytes: number; read: number }): Promise<void> {
    for (const name of await dir.names()) {
      const path = join(sandboxDir, name);
      // Removed by a process of the sandbox while it was read: it is not part of the state.
      const st = await dir.lstat(name);
      if (!st) continue;
      if (++budget.entries > DIGEST_LIMITS.entries) throw new TreeTooLargeError(DIGEST_LIMITS.entries);
      const meta = `${(st.mode & 0o7777n).toString(8)} ${st.uid}:${st.gid}`;
      if (st.isDirectory()) {
        out.push([path, `dir ${meta}`]);
        const sub = await dir.openDir(name);
        if (!sub) continue;
        try {
          await this.walk(sub, path, out, budget);
        } finally {
          await sub.close();
        }
      } else if (st.isFile()) {
        if (st.size > BigInt(DIGEST_LIMITS.fileBytes)) throw new DigestTooLarge(`${path} has ${st.size} bytes, more than ${DIGEST_LIMITS.fileBytes} (a sparse giant?)`);
        budget.bytes += Number(st.size);
        out.push([path, `file ${meta} ${st.size} ${await this.contentHash(dir, name, path, st, budget)}`]);
      } else if (st.isSymbolicLink()) {
        out.push([path, `link ${await readlink(`/proc/self/fd/${dir.fd}/${name}`).catch(() => '?')}`]);
      } else if (st.isCharacterDevice() && st.rdev === 0n) {
        // overlayfs's whiteout: the file of the lower layer was deleted.
        out.push([path, 'deleted']);
      } else {
        out.push([path, `${st.isFIFO() ? 'fifo' : st.isSocket() ? 'socket' : 'device'} ${meta} ${st.rdev}`]);
      }
    }
  }

  private async contentHash(dir: OpenDir, name: string, path: string, st: BigIntStats, budget: { read: number }): Promise<string> {
    const key = `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
    const known = this.hashes.get(key);
    if (known) return known;
    if (st.size === 0n) return EMPTY_SHA256;
    // O_NOFOLLOW and O_NONBLOCK, regular files only: swapped for a link or a FIFO since the lstat, it is not read.
    const file = await dir.openFile(name);
    if (!file) return 'gone';
    const hash = createHash('sha256');
    try {
      // Sized to the file (1 MiB at most) and not zero-filled (only what was read is hashed). A zeroed MiB per
      // file cost 1.2 s per 9,508 files, plus collecting 9.5 GB of buffers (docs/resume-and-branch.md).
      const chunk = Buffer.allocUnsafe(Math.min(Number(st.size) + 1, 1 << 20));
      let read = 0;
      for (;;) {
        const { bytesRead } = await file.read(chunk, 0, chunk.length, read);
        if (bytesRead === 0) break;
        read += bytesRead;
        budget.read += bytesRead;
        // Grown past its size since the lstat (a writer still at it): bounded all the same.
        if (read > DIGEST_LIMITS.fileBytes) throw new DigestTooLarge(`${path} grew past ${DIGEST_LIMITS.fileBytes} bytes while read`);
        if (budget.read > DIGEST_LIMITS.totalBytes) throw new DigestTooLarge(`more than ${DIGEST_LIMITS.totalBytes} bytes of changed files to read`);
        hash.update(chunk.subarray(0, bytesRead));
      }
    } finally {
      await file.close();
    }
    const hex = hash.digest('hex');
    if (this.hashes.size >= MAX_CACHED_HASHES) this.hashes.clear();
    this.hashes.set(key, hex);
    return hex;
  }
}

/** The digest of sorted entries, and one per area (the first components of a path) to say what differed. */
export function summarize(all: readonly [string, string][], bytes: number): SandboxStateDigest {
  const entries = all.filter(([path]) => !isVolatilePath(path));
  const volatile = all.filter(([path]) => isVolatilePath(path));
  const digestOf = (list: readonly [string, string][]): string => {
    const h = createHash('sha256');
    for (const [path, what] of list) h.update(`${path}\0${what}\n`);
    return h.digest('hex');
  };
  let depth = 3;
  let areas = areasAt(entries, depth);
  while (areas.size > MAX_AREAS && depth > 1) areas = areasAt(entries, --depth);
  return {
    digest: digestOf(entries),
    ...(volatile.length > 0 ? { volatile: { digest: digestOf(volatile), files: volatile.length } } : {}),
    areas: Object.fromEntries([...areas].map(([area, h]) => [area, h.digest('hex').slice(0, 16)])),
    files: entries.length,
    bytes,
  };
}

function areasAt(entries: readonly [string, string][], depth: number): Map<string, ReturnType<typeof createHash>> {
  const areas = new Map<string, ReturnType<typeof createHash>>();
  for (const [path, what] of entries) {
    const area = `/${path.split('/').filter(Boolean).slice(0, depth).join('/')}`;
    let h = areas.get(area);
    if (!h) areas.set(area, (h = createHash('sha256')));
    h.update(`${path}\0${what}\n`);
  }
  return areas;
}
