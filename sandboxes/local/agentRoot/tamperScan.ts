/**
 * The evidence that an agent changed what an in-place verifier trusts (shared/integrityRules.ts),
 * read from the host: the overlay's upper layer holds exactly what the agent
 * changed in the image (a replaced file is a copy there, a removed one a whiteout, and neither can be
 * undone from inside: removing a copy leaves a whiteout), so comparing it with the image's own files
 * tells what was replaced, removed or added, however and whenever it happened. The upper layer is
 * walked by descriptor, never following a link (rootedTree.ts), and bounded; the image's files are the
 * pipeline's own (the cached root filesystem), read on the host.
 */
import { lstat, open, readdir } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { SHARED_LIBRARY, SYSTEM_DIRS, VERIFIER_BOUND_FILES, inPackageDir, isConsoleScript, isProtectedImageFile, isStartupHook, pathDirOf, PATH_DIRS } from '../../../shared/integrityRules.js';
import type { LocalSandboxHandle } from '../../../shared/sandbox.js';
import { sandboxError, type LocalSandboxContext } from '../localSandboxContext.js';
import { processStartTime } from '../procfs.js';
import { loaderView } from './loaderView.js';
import { MergedRoot } from './mergedRoot.js';
import { OpenDir, TreeTooLargeError, walkTree } from './rootedTree.js';

/** Most entries of an upper layer the check walks; past it the state cannot be checked, which is evidence too. */
export const MAX_CHECKED_ENTRIES = 1_000_000;
/** Most findings listed (the first ones are enough to see what happened). */
const MAX_FINDINGS = 20;

type Kind = 'file' | 'dir' | 'link' | 'other';

async function imageEntry(rootfs: string, path: string): Promise<Kind | undefined> {
  try {
    const st = await lstat(join(rootfs, path));
    return st.isDirectory() ? 'dir' : st.isFile() ? 'file' : st.isSymbolicLink() ? 'link' : 'other';
  } catch {
    return undefined;
  }
}

async function imageHead(rootfs: string, path: string): Promise<string> {
  try {
    const f = await open(join(rootfs, path), 'r');
    try {
      const buffer = Buffer.alloc(4096);
      const { bytesRead } = await f.read(buffer, 0, 4096, 0);
      return buffer.subarray(0, bytesRead).toString('latin1');
    } finally {
      await f.close();
    }
  } catch {
    return '';
  }
}

/** The image's shared libraries by file name (outside package directories), and the directories that hold them. */
interface LibraryIndex {
  byName: Map<string, string>;
  dirs: Set<string>;
}

/** Walked once per root filesystem. */
const libraryIndexes = new Map<string, Promise<LibraryIndex>>();

function imageLibraries(rootfs: string): Promise<LibraryIndex> {
  let index = libraryIndexes.get(rootfs);
  if (!index) {
    index = (async () => {
      const byName = new Map<string, string>();
      const dirs = new Set<string>();
      const walk = async (rel: string, depth: number): Promise<void> => {
        if (depth > 12 || byName.size > 500_000 || inPackageDir(rel)) return;
        let entries;
        try {
          entries = await readdir(join(rootfs, rel), { withFileTypes: true });
        } catch {
          return;
        }
        for (const e of entries) {
          const path = `${rel}/${e.name}`;
          if (e.isDirectory()) await walk(path, depth + 1);
          else if ((e.isFile() || e.isSymbolicLink()) && SHARED_LIBRARY.test(e.name)) {
            dirs.add(rel);
            if (!byName.has(e.name)) byName.set(e.name, path);
          }
        }
      };
      for (const dir of SYSTEM_DIRS.filter((d) => d.includes('lib'))) {
        if ((await imageEntry(rootfs, dir)) === 'dir') await walk(dir, 0);
      }
      return { byName, dirs };
    })();
    if (libraryIndexes.size > 64) libraryIndexes.clear();
    libraryIndexes.set(rootfs, index);
  }
  return index;
}

/** ELF class and machine of a file's header (bytes 4 and 18-19); a library of another kind is never loaded in the image's place. */
function elfKind(head: Buffer): string | undefined {
  if (head.length < 20 || head.readUInt32BE(0) !== 0x7f454c46) return undefined;
  return `${head[4]}:${head.readUInt16LE(18)}`;
}

/**
 * What the agent replaced, removed or planted that the verifier would load. `upperHostPath` is the
 * overlay's upper directory as the host reaches it (through the launcher's mount namespace); `rootfs`
 * the image's root filesystem. Each finding names the path and what was done to it.
 */
export async function tamperFindings(upperHostPath: string, rootfs: string): Promise<string[]> {
  const findings: string[] = [];
  const note = (line: string): void => {
    if (findings.length < MAX_FINDINGS) findings.push(line);
    else if (findings.length === MAX_FINDINGS) findings.push('… (more not listed)');
  };
  const upper = await OpenDir.openTrusted(upperHostPath);
  try {
    const libraries = await imageLibraries(rootfs);
    const pristine = new MergedRoot(undefined, rootfs);
    const root = new MergedRoot(upper, rootfs);
    const loader = await loaderView(root, pristine, libraries.byName, libraries.dirs);
    for (const finding of loader.findings) note(finding);
    for await (const { path, stat } of walkTree(upper, MAX_CHECKED_ENTRIES)) {
      if (findings.length > MAX_FINDINGS) break;
      const whiteout = stat.isCharacterDevice() && stat.rdev === 0n;
      const image = await imageEntry(rootfs, path);
      if (VERIFIER_BOUND_FILES.has(path) && !whiteout && !stat.isFile()) {
        note(`/${path}: made ${stat.isSymbolicLink() ? 'a symbolic link' : 'something other than a file'} by the agent, where the verifier puts a file of its own`);
        continue;
      }
      if (image !== undefined) {
        if (image === 'dir' && stat.isDirectory()) continue;
        // A system file, or a library where the loader looks for one by name (an /opt/conda/lib in ld.so.conf).
        const loadedByName = SHARED_LIBRARY.test(basename(path)) && loader.searches(dirname(path));
        if (!isProtectedImageFile(path) && !loadedByName) continue;
        // A package manager's console script only imports from a package directory: upgraded or removed with its package.
        if (image === 'file' && pathDirOf(path) && isConsoleScript(await imageHead(rootfs, path))) continue;
        const was = image === 'dir' ? 'a directory' : image === 'link' ? 'a symbolic link' : image === 'file' ? 'a file' : 'an entry';
        note(whiteout ? `/${path}: removed (${was} of the image)` : `/${path}: replaced (${was} of the image) by the agent`);
        continue;
      }
      if (whiteout || stat.isDirectory()) continue;
      // Added: code every process (or every Python) runs unasked, a program found before the image's
      // on the PATH, a library found before the image's by its name.
      if (isStartupHook(path)) {
        note(`/${path}: added by the agent (runs in every ${path.endsWith('.py') ? 'Python process' : 'process'} the verifier starts)`);
        continue;
      }
      const inPath = pathDirOf(path);
      if (inPath) {
        for (const later of PATH_DIRS.slice(inPath.rank + 1)) {
          const k = await imageEntry(rootfs, `${later}/${inPath.name}`);
          if (k === 'file' || k === 'link') {
            note(`/${path}: added by the agent ahead of the image's /${later}/${inPath.name} on the PATH`);
            break;
          }
        }
        continue;
      }
      // A library named as one of the image's where the loader looks by name; elsewhere it is a package's private copy.
      const name = basename(path);
      const imageLibrary = SHARED_LIBRARY.test(name) ? libraries.byName.get(name) : undefined;
      if (imageLibrary && imageLibrary !== path && loader.searches(dirname(path))) {
        const added = elfKind(await root.head(path, 20));
        if (added === undefined || added === elfKind(await pristine.head(imageLibrary, 20))) note(`/${path}: added by the agent with the name of the image's library /${imageLibrary}, where the loader looks for it by name`);
      }
    }
  } catch (err) {
    if (err instanceof TreeTooLargeError) note(`the agent changed more than ${err.limit} entries of the image; the verifier's programs cannot be checked`);
    else throw err;
  } finally {
    await upper.close();
  }
  return findings;
}

/** The findings for a local sandbox: its upper layer through its launcher's mount namespace, against its image. */
export async function sandboxTamperEvidence(ctx: LocalSandboxContext, h: LocalSandboxHandle): Promise<string[]> {
  const record = await ctx.registry.get(h.id);
  if (!record?.handle || record.launcherPid === null) throw sandboxError('sandbox_lost', `sandbox ${h.id} has no record or launcher; it was torn down`);
  // A host-base sandbox's programs are the host's, read-only: only an image sandbox's root is the agent's to write.
  const rootfs = record.spec?.rootfs;
  if (!rootfs) return [];
  const launcherStart = processStartTime(record.launcherPid);
  if (launcherStart === undefined) throw sandboxError('sandbox_lost', `sandbox ${h.id} is gone: its launcher (pid ${record.launcherPid}) no longer runs`);
  const findings = await tamperFindings(`/proc/${record.launcherPid}/root${join(record.stateDir, 'rw', 'upper')}`, rootfs);
  if (processStartTime(record.launcherPid) !== launcherStart) throw sandboxError('sandbox_lost', `sandbox ${h.id} died while its layer was checked`);
  return findings;
}
