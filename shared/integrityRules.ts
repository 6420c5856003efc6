/**
 * What an agent may not change for an in-place verification to be trusted (docs/verifier-integrity.md):
 * the image's programs and system libraries, which the verifier's processes load (its shell, coreutils,
 * interpreters, the dynamic loader and libc), and the hooks that run code in every process without
 * being named (ld.so.preload, Python's sitecustomize/usercustomize). What the agent added to package
 * directories (site-packages, node_modules, ...) is the environment the tests judge, as under Harbor.
 *
 * Pure rules on relative paths ('usr/bin/cat', no leading slash); the provider walks the layer.
 */

/** The image's directories of programs and system libraries (merged-/usr or not). */
export const SYSTEM_DIRS = [
  'bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32',
  'usr/bin', 'usr/sbin', 'usr/lib', 'usr/lib32', 'usr/lib64', 'usr/libx32', 'usr/libexec',
  'usr/local/bin', 'usr/local/sbin', 'usr/local/lib', 'usr/local/libexec',
] as const;

/** The verifier's PATH, in order (shared/sandbox SANDBOX_PATH): an added program in an earlier one shadows the image's in a later one. */
export const PATH_DIRS = ['usr/local/sbin', 'usr/local/bin', 'usr/sbin', 'usr/bin', 'sbin', 'bin'] as const;

/** Where package managers keep what they install: an agent's upgrade there is its environment, not a forgery. */
const PACKAGE_DIR = /(^|\/)(site-packages|dist-packages|node_modules|gems|vendor_perl)(\/|$)/;
/** Code every Python process runs at start without importing it by name. */
const PYTHON_STARTUP_HOOK = /(^|\/)(sitecustomize|usercustomize)\.py$/;
/** Files the dynamic loader reads to load a library into every process. */
const LOADER_HOOKS = new Set(['etc/ld.so.preload']);
/** A shared library or the dynamic loader. */
export const SHARED_LIBRARY = /(\.so(\.[0-9]+)*$)|(^ld-linux.*\.so)/;

export function inSystemDir(path: string): boolean {
  return SYSTEM_DIRS.some((d) => path === d || path.startsWith(`${d}/`));
}

export function inPackageDir(path: string): boolean {
  return PACKAGE_DIR.test(path);
}

export function isStartupHook(path: string): boolean {
  return LOADER_HOOKS.has(path) || (PYTHON_STARTUP_HOOK.test(path) && (inSystemDir(path) || inPackageDir(path)));
}

/**
 * A console script a package manager wrote (pip's `#!/usr/bin/python3` + `from pkg import main` +
 * `sys.exit(main())`): it only imports from a package directory, which the agent may upgrade anyway,
 * so replacing it (pip install --upgrade pip) is not a forgery of its own.
 */
export function isConsoleScript(head: string): boolean {
  const firstLine = head.split('\n', 1)[0] ?? '';
  return head.length < 4096 && /^#!\S*python[0-9.]*\s*$/.test(firstLine) && /^from [\w.]+ import [\w.]+$/m.test(head) && /sys\.exit\(/.test(head);
}

/**
 * Python's bytecode caches: the verifier's Pythons neither read nor write them (PYTHONPYCACHEPREFIX
 * points every one at a cache of the verifier's own), so what is in them is nobody's program.
 */
const BYTECODE_CACHE = /(^|\/)__pycache__\//;

/**
 * Directories whose paths the verifier's hooks and programs are named by (/etc/ld.so.preload,
 * /etc/nsswitch.conf, /usr/local/bin): replaced by a link, every file under them would be the agent's
 * at a path the checks of the image's files never see.
 */
const NAMING_DIRS = new Set(['etc', 'usr', 'usr/local']);
/** Files the verifier beside the agent binds its own over (bwrapArgs.ts): a link there could aim that mount elsewhere. */
export const VERIFIER_BOUND_FILES = new Set(['etc/nsswitch.conf', 'etc/hosts', 'etc/hostname', 'etc/resolv.conf']);

/** Whether a file the image has at `path` is one the agent may not replace or remove. */
export function isProtectedImageFile(path: string): boolean {
  if (isStartupHook(path) || NAMING_DIRS.has(path)) return true;
  if (BYTECODE_CACHE.test(path)) return false;
  return inSystemDir(path) && !inPackageDir(path);
}

/** The PATH directory `path` is directly in, with its rank; undefined when it is in none. */
export function pathDirOf(path: string): { dir: string; rank: number; name: string } | undefined {
  const slash = path.lastIndexOf('/');
  if (slash < 0) return undefined;
  const dir = path.slice(0, slash);
  const rank = (PATH_DIRS as readonly string[]).indexOf(dir);
  return rank < 0 ? undefined : { dir, rank, name: path.slice(slash + 1) };
}
