/**
 * `RUN --mount=...` of a task's Dockerfile, checked before podman sees it. The builder here is
 * Debian bookworm's podman 4.3.1, built against buildah 1.28.2+ds1-3+deb12u1, which carries
 * neither upstream fix of the mounts that reach the host's filesystem (read in its source,
 * internal/parse/parse.go):
 * - CVE-2024-9675 (fixed in buildah 1.38): a cache mount's `id` is joined to buildah's cache
 *   directory unchecked, so `id=../../..` mounts the host's root, writable, into the RUN step;
 * - CVE-2024-1753 (fixed in 1.35): a bind mount's source is joined to its context (the build
 *   context, or an image or stage with `from=`) and then bind-mounted by the host, so a symbolic
 *   link there (`hostroot -> /`) is followed on the host.
 * So: a cache mount's id is a plain name; a bind or cache mount takes nothing `from=` another
 * image or stage (whose links the build itself may have made); a bind mount's source in the
 * context goes through no symbolic link and is never mounted writable (it is the task's own
 * directory on the host); a mount option names no build argument (`$`), which would be expanded
 * after this check. Every other mount (tmpfs, secret, ssh, a plain cache) is left to podman.
 */
import { lstatSync } from 'node:fs';
import { join } from 'node:path';
import { ClassifiedError } from '../shared/failures.js';

interface RunMount {
  type: string;
  options: Map<string, string | true>;
  spec: string;
}

/** The --mount flags of a RUN instruction (before its command). */
function mountsOf(instruction: string): RunMount[] {
  const words = instruction.replace(/\\\n/g, ' ').trim().split(/\s+/).slice(1);
  const mounts: RunMount[] = [];
  for (const word of words) {
    if (!word.startsWith('--')) break;
    if (!word.startsWith('--mount=')) continue;
    const spec = word.slice('--mount='.length);
    const options = new Map<string, string | true>();
    for (const part of spec.split(',')) {
      const eq = part.indexOf('=');
      if (eq < 0) options.set(part.toLowerCase(), true);
      else options.set(part.slice(0, eq).toLowerCase(), part.slice(eq + 1));
    }
    const type = options.get('type');
    mounts.push({ type: typeof type === 'string' ? type.toLowerCase() : 'bind', options, spec });
  }
  return mounts;
}

/** The first symbolic link on `relative` below `root`, if any (what the host would follow). */
function linkOnPath(root: string, relative: string): string | undefined {
  let path = root;
  for (const part of relative.split('/').filter((p) => p !== '' && p !== '.')) {
    path = join(path, part);
    try {
      if (lstatSync(path).isSymbolicLink()) return path;
    } catch {
      return undefined; // absent: podman reports it
    }
  }
  return undefined;
}

/**
 * Refuses every RUN --mount of `instructions` that would reach the host's filesystem, naming the
 * line and the fix. `lineOf(i)` is instruction i's line for messages; `contextDir` the build context.
 */
export function checkRunMounts(instructions: string[], lineOf: (index: number) => string, contextDir: string): void {
  instructions.forEach((instruction, index) => {
    if (!/^\s*RUN\s/i.test(instruction)) return;
    for (const mount of mountsOf(instruction)) {
      const where = `${lineOf(index)}: --mount=${mount.spec}`;
      const refuse = (why: string, fix: string): never => {
        throw new ClassifiedError('task', 'invalid_spec', `${where}: ${why}. Fix: ${fix}`);
      };
      if (mount.spec.includes('$')) refuse('a mount option names a build argument, expanded after this builder could check it', 'write the mount options literally');
      if (mount.type !== 'bind' && mount.type !== 'cache') continue;
      if (mount.options.has('from')) {
        refuse(
          `a ${mount.type} mount from another image or stage is refused here: podman 4.3 (buildah 1.28) follows a symbolic link in it on the host (CVE-2024-1753)`,
          'COPY --from= the files into the stage instead',
        );
      }
      if (mount.type === 'cache') {
        const id = mount.options.get('id');
        if (typeof id === 'string' && (id.startsWith('/') || id.split('/').includes('..'))) {
          refuse(
            `a cache id that leaves the build cache's directory: podman 4.3 (buildah 1.28) would mount the host's ${id.startsWith('/') ? 'directory of that name' : 'directories above it'} into the build (CVE-2024-9675)`,
            'name the cache with a plain id such as id=pip-cache',
          );
        }
        continue;
      }
      // A bind mount of the build context (the task's environment/ directory on the host).
      if (mount.options.has('rw') || mount.options.has('readwrite')) {
        refuse("a writable bind mount of the build context would let the build change the task's own files on this host", 'drop rw (a RUN step writes into the image, not the context)');
      }
      const source = mount.options.get('source') ?? mount.options.get('src');
      const link = typeof source === 'string' ? linkOnPath(contextDir, source) : undefined;
      if (link) {
        refuse(
          `the bind mount's source goes through the symbolic link ${link}, which podman 4.3 (buildah 1.28) follows on the host (CVE-2024-1753)`,
          'bind-mount the real directory, or COPY the files',
        );
      }
    }
  });
}
