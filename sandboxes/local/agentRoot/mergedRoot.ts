/**
 * A sandbox's root as the agent left it, read from the host without running anything of the sandbox:
 * the overlay's upper layer (what the agent wrote, walked by descriptor and never followed out of it:
 * rootedTree.ts) over the image's root filesystem (the pipeline's cached copy). Symbolic links of
 * either layer are resolved inside this root, never against the host's, with a bounded number of hops.
 */
import { lstatSync, readdirSync, readlinkSync, type BigIntStats } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import type { OpenDir} from './rootedTree.js';
import { readSmallFile } from './rootedTree.js';

/** Links followed in one resolution before it gives up (the kernel's own limit). */
const MAX_LINK_HOPS = 40;

export type MergedFile =
  | { from: 'agent' | 'image'; bytes: Buffer }
  | { from: 'absent' }
  /** The agent left something at the path that cannot be read as a file (a link, a FIFO, too large). */
  | { from: 'unreadable'; why: string };

export interface ResolvedPath {
  /** The path with every link resolved, relative to the root. */
  physical: string;
  exists: boolean;
  /** Whether the agent wrote the entry (or a link on the way to it); a directory the agent wrote into is not the agent's for that. */
  agentWritten: boolean;
}

function isWhiteout(stat: BigIntStats): boolean {
  return stat.isCharacterDevice() && stat.rdev === 0n;
}

function components(rel: string): string[] {
  return rel.split('/').filter((p) => p !== '' && p !== '.');
}

export class MergedRoot {
  /** `upper` undefined: the image's root alone, as it was before the agent. */
  constructor(
    private readonly upper: OpenDir | undefined,
    readonly rootfs: string,
  ) {}

  /** The upper layer's entry at `parts` (undefined when the upper layer has none), its directory held open. */
  private async upperEntry<T>(parts: string[], use: (dir: OpenDir, name: string, stat: BigIntStats) => Promise<T>): Promise<T | undefined> {
    const last = parts[parts.length - 1];
    if (last === undefined || !this.upper) return undefined;
    const opened: OpenDir[] = [];
    try {
      let dir = this.upper;
      for (const part of parts.slice(0, -1)) {
        const stat = await dir.lstat(part);
        if (!stat || !stat.isDirectory()) return undefined;
        const sub = await dir.openDir(part);
        if (!sub) return undefined;
        opened.push(sub);
        dir = sub;
      }
      const stat = await dir.lstat(last);
      return stat ? await use(dir, last, stat) : undefined;
    } finally {
      for (const d of opened.reverse()) await d.close();
    }
  }

  /** The entry at `parts` as the sandbox sees it: the upper layer's (a whiteout hides the image's), else the image's. */
  private async entry(parts: string[]): Promise<{ stat: BigIntStats; agent: boolean; link?: string } | undefined> {
    const upper = await this.upperEntry(parts, async (dir, name, stat) => ({ stat, link: stat.isSymbolicLink() ? readlinkSync(`/proc/self/fd/${dir.fd}/${name}`) : undefined }));
    if (upper) return isWhiteout(upper.stat) ? undefined : { stat: upper.stat, agent: true, link: upper.link };
    const stat = this.imageStat(parts);
    if (!stat) return undefined;
    return { stat, agent: false, link: stat.isSymbolicLink() ? readlinkSync(join(this.rootfs, ...parts)) : undefined };
  }

  /** lstat of the image's entry at `parts`, undefined when a directory on the way is missing or a link (never followed out of the image). */
  private imageStat(parts: string[]): BigIntStats | undefined {
    for (let i = 1; i < parts.length; i++) {
      const dir = lstatSync(join(this.rootfs, ...parts.slice(0, i)), { bigint: true, throwIfNoEntry: false });
      if (!dir?.isDirectory()) return undefined;
    }
    return lstatSync(join(this.rootfs, ...parts), { bigint: true, throwIfNoEntry: false });
  }

  /** Resolves every link of `rel` inside this root (an absolute target against the root, a relative one against its directory). */
  async resolve(rel: string): Promise<ResolvedPath> {
    let pending = components(rel);
    const done: string[] = [];
    let agentWritten = false;
    let hops = 0;
    while (pending.length > 0) {
      const part = pending.shift() as string;
      if (part === '..') {
        done.pop();
        continue;
      }
      const here = [...done, part];
      const entry = await this.entry(here);
      if (!entry) return { physical: [...here, ...pending].join('/'), exists: false, agentWritten };
      // A directory of the upper layer is a copy made when the agent wrote inside it; only a link or the entry itself is the agent's.
      if (entry.agent && (entry.link !== undefined || pending.length === 0)) agentWritten = true;
      if (entry.link !== undefined) {
        if (++hops > MAX_LINK_HOPS) return { physical: [...here, ...pending].join('/'), exists: false, agentWritten };
        pending = [...components(entry.link), ...pending];
        if (entry.link.startsWith('/')) done.length = 0;
        continue;
      }
      done.push(part);
      if (pending.length > 0 && !entry.stat.isDirectory()) return { physical: [...done, ...pending].join('/'), exists: false, agentWritten };
    }
    return { physical: done.join('/'), exists: true, agentWritten };
  }

  /** The first `n` bytes of a file of the root (links resolved); empty when it is not a readable file. */
  async head(rel: string, n: number): Promise<Buffer> {
    const file = await this.read(rel, Number.MAX_SAFE_INTEGER, n);
    return 'bytes' in file ? file.bytes : Buffer.alloc(0);
  }

  /** Reads a file of the root (links resolved inside it), at most `maxBytes`. */
  async read(rel: string, maxBytes: number, prefix = maxBytes): Promise<MergedFile> {
    const resolved = await this.resolve(rel);
    if (!resolved.exists) return { from: 'absent' };
    const parts = components(resolved.physical);
    const fromUpper = await this.upperEntry(parts, async (dir, name, stat): Promise<MergedFile> => {
      if (isWhiteout(stat)) return { from: 'absent' };
      if (!stat.isFile()) return { from: 'unreadable', why: 'not a regular file' };
      if (stat.size > BigInt(maxBytes)) return { from: 'unreadable', why: `larger than ${maxBytes} bytes` };
      const bytes = await readSmallFile(dir, name, Math.min(prefix, Number(stat.size)));
      return bytes ? { from: 'agent', bytes } : { from: 'unreadable', why: 'not a regular file' };
    });
    if (fromUpper) return fromUpper;
    const stat = this.imageStat(parts);
    if (!stat?.isFile()) return { from: 'absent' };
    if (stat.size > BigInt(maxBytes)) return { from: 'unreadable', why: `larger than ${maxBytes} bytes` };
    const file = await open(join(this.rootfs, ...parts), 'r');
    try {
      const size = Math.min(prefix, Number(stat.size));
      const buffer = Buffer.alloc(size);
      const { bytesRead } = await file.read(buffer, 0, size, 0);
      return { from: 'image', bytes: buffer.subarray(0, bytesRead) };
    } finally {
      await file.close();
    }
  }

  /** The names in a directory of the root (links resolved): the upper layer's over the image's, minus whiteouts. */
  async list(rel: string): Promise<string[]> {
    const resolved = await this.resolve(rel);
    if (!resolved.exists) return [];
    const parts = components(resolved.physical);
    const names = new Set<string>();
    const hidden = new Set<string>();
    const listUpper = async (dir: OpenDir): Promise<void> => {
      for (const name of await dir.names()) {
        const stat = await dir.lstat(name);
        if (stat && isWhiteout(stat)) hidden.add(name);
        else if (stat) names.add(name);
      }
    };
    if (parts.length === 0) {
      if (this.upper) await listUpper(this.upper);
    }
    else {
      await this.upperEntry(parts, async (dir, name, stat) => {
        if (!stat.isDirectory()) return;
        const sub = await dir.openDir(name);
        if (!sub) return;
        try {
          await listUpper(sub);
        } finally {
          await sub.close();
        }
      });
    }
    if (this.imageStat(parts)?.isDirectory()) for (const name of readdirSync(join(this.rootfs, ...parts))) if (!hidden.has(name)) names.add(name);
    return [...names].sort();
  }
}
