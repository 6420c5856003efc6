/**
 * Where the verifier's processes would load shared libraries from in a sandbox as the agent left it,
 * and what the agent changed of that (docs/verifier-integrity.md): the loader's cache maps a library
 * name to a file the agent wrote instead of the image's, the name service switch names a module the
 * agent wrote (for a service of the image's switch: the verifier's lookups use that one), or the
 * loader's configuration cannot be read. Also which directories the loader
 * searches by name (its default ones, ldconfig's configured ones, those its cache points into, and
 * where the image keeps its libraries, for programs whose run path names them): a file there with the
 * name of an image library is what a program may load instead; elsewhere (perl's XS modules of a
 * second perl, a second JDK's libjli.so) it is a package's private copy.
 */
import { basename, dirname } from 'node:path';
import { isLoaderDefaultDir, nssModule, nssServices, parseLoaderCache, parseLoaderConf, relativeDir, searchDirOf, type LoaderCacheEntry } from '../../../shared/loaderConfig.js';
import type { MergedRoot } from './mergedRoot.js';
import { NSSWITCH as NSSWITCH_DEFAULTS } from '../sandboxScripts.js';

/** The largest loader cache or configuration file read (a real cache is well under 1 MiB). */
const MAX_CONFIG_BYTES = 64 * 1024 * 1024;
/** Configuration files followed through `include` (ldconfig's nesting is shallow in practice). */
const MAX_CONF_FILES = 512;
const MAX_INCLUDE_DEPTH = 8;
/** The loader's default directories, in its order, for finding a module that is not in the cache. */
const DEFAULT_SEARCH = ['lib/x86_64-linux-gnu', 'usr/lib/x86_64-linux-gnu', 'lib64', 'usr/lib64', 'lib', 'usr/lib'];

export interface LoaderView {
  /** Whether the loader looks for libraries by name directly in `dir` (a physical path relative to the root). */
  searches(dir: string): boolean;
  /** What the agent changed of where libraries load from. */
  findings: string[];
}

/** The image's own loader cache, parsed once per root filesystem. */
const imageCaches = new Map<string, Promise<LoaderCacheEntry[]>>();

async function cacheOf(root: MergedRoot): Promise<{ entries: LoaderCacheEntry[]; fromAgent: boolean; unreadable?: string }> {
  const file = await root.read('etc/ld.so.cache', MAX_CONFIG_BYTES);
  if (file.from === 'absent') return { entries: [], fromAgent: false };
  if (file.from === 'unreadable') return { entries: [], fromAgent: true, unreadable: file.why };
  // Bytes the loader rejects as a cache leave it to its default directories: nothing to compare.
  return { entries: parseLoaderCache(file.bytes) ?? [], fromAgent: file.from === 'agent' };
}

function imageCache(image: MergedRoot): Promise<LoaderCacheEntry[]> {
  let cache = imageCaches.get(image.rootfs);
  if (!cache) {
    cache = cacheOf(image).then((c) => c.entries);
    if (imageCaches.size > 64) imageCaches.clear();
    imageCaches.set(image.rootfs, cache);
  }
  return cache;
}

/** A shell pattern of one path component (`*.conf`) as a regular expression. */
function componentPattern(glob: string): RegExp {
  return new RegExp(`^${glob.replace(/[.+^${}()|\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]')}$`);
}

/** The directories ldconfig's configuration names (ld.so.conf and what it includes), with what of it the agent left unreadable. */
async function configuredDirs(root: MergedRoot): Promise<{ dirs: string[]; unreadable: string[] }> {
  const dirs: string[] = [];
  const unreadable: string[] = [];
  let files = 0;
  const readConf = async (rel: string, depth: number): Promise<void> => {
    if (depth > MAX_INCLUDE_DEPTH || ++files > MAX_CONF_FILES) return;
    const file = await root.read(rel, MAX_CONFIG_BYTES);
    if (file.from === 'unreadable') unreadable.push(`/${rel}: ${file.why}`);
    if (!('bytes' in file)) return;
    const conf = parseLoaderConf(file.bytes.toString('latin1'));
    dirs.push(...conf.dirs);
    for (const pattern of conf.includes) {
      // A relative include is relative to /etc (ldconfig's behaviour for ld.so.conf).
      const absolute = relativeDir(pattern.startsWith('/') ? pattern : `/etc/${pattern}`);
      if (absolute === undefined) continue;
      const dir = dirname(absolute);
      const name = basename(absolute);
      if (!/[*?[]/.test(dir) && /[*?]/.test(name)) {
        const match = componentPattern(name);
        for (const entry of await root.list(dir)) if (match.test(entry)) await readConf(`${dir}/${entry}`, depth + 1);
      } else if (!/[*?[]/.test(absolute)) await readConf(absolute, depth + 1);
    }
  };
  await readConf('etc/ld.so.conf', 0);
  return { dirs, unreadable };
}

/** The physical directory (links resolved in the root) of each absolute directory named. */
async function physicalDirs(root: MergedRoot, named: Iterable<string>): Promise<Set<string>> {
  const out = new Set<string>();
  for (const path of new Set(named)) {
    const rel = relativeDir(path);
    if (rel === undefined) continue;
    const resolved = await root.resolve(rel);
    out.add(searchDirOf(resolved.physical));
  }
  return out;
}

/**
 * The loader's view of the sandbox (`root`: as the agent left it) against the image's (`image`).
 * `imageLibraries` are the image's shared libraries by name, `imageLibraryDirs` where it keeps them.
 */
export async function loaderView(root: MergedRoot, image: MergedRoot, imageLibraries: ReadonlyMap<string, string>, imageLibraryDirs: ReadonlySet<string>): Promise<LoaderView> {
  const findings: string[] = [];
  const [cache, original, conf, imageConf] = await Promise.all([cacheOf(root), imageCache(image), configuredDirs(root), configuredDirs(image)]);
  if (cache.unreadable) findings.push(`/etc/ld.so.cache: ${cache.unreadable}, left so by the agent; where the verifier's programs load their libraries from cannot be checked`);
  for (const what of conf.unreadable) findings.push(`${what}, left so by the agent; the loader's configuration cannot be checked`);

  const searched = await physicalDirs(root, [...conf.dirs, ...imageConf.dirs, ...cache.entries.map((e) => dirname(e.path)), ...original.map((e) => dirname(e.path))]);
  for (const dir of imageLibraryDirs) searched.add(dir);
  const searches = (dir: string): boolean => isLoaderDefaultDir(searchDirOf(dir)) || searched.has(searchDirOf(dir));

  if (cache.fromAgent) {
    // An entry of the agent's cache the image's did not have, for a name the image's programs load.
    const imagePairs = new Set(original.map((e) => `${e.flags}\0${e.name}\0${e.path}`));
    const imagePaths = new Map<string, LoaderCacheEntry>();
    for (const e of original) if (!imagePaths.has(`${e.flags}\0${e.name}`)) imagePaths.set(`${e.flags}\0${e.name}`, e);
    const nativeFlags = mostCommon(original.map((e) => e.flags));
    for (const e of cache.entries) {
      if (imagePairs.has(`${e.flags}\0${e.name}\0${e.path}`)) continue;
      const imageEntry = imagePaths.get(`${e.flags}\0${e.name}`);
      if (!imageEntry && !(imageLibraries.has(e.name) && (nativeFlags === undefined || e.flags === nativeFlags))) continue;
      const rel = relativeDir(e.path);
      if (rel === undefined) continue;
      const target = await root.resolve(rel);
      if (!target.exists || !target.agentWritten) continue;
      const was = imageEntry ? `the image's cache maps it to ${imageEntry.path}` : `the image has it at /${imageLibraries.get(e.name) ?? '?'}`;
      findings.push(`/etc/ld.so.cache: written by the agent, maps ${e.name} to ${e.path}, a file the agent wrote (${was}): the verifier's programs would load it`);
    }
  }

  // Each service of the name service switch is a module glibc loads by name on a user, group or host
  // lookup. The verifier's lookups use the image's switch (bwrapArgs.ts binds it beside the agent):
  // what the agent's names is not loaded, but a module the agent wrote for a service the image names is.
  const nss = await image.read('etc/nsswitch.conf', MAX_CONFIG_BYTES);
  const services = 'bytes' in nss ? nssServices(nss.bytes.toString('latin1')) : nssServices(NSSWITCH_DEFAULTS);
  const configured = await physicalDirs(root, conf.dirs);
  for (const service of services) {
    const module = nssModule(service);
    const cached = cache.entries.find((e) => e.name === module);
    const candidates = cached ? [cached.path] : [...configured, ...DEFAULT_SEARCH].map((d) => `/${d.replace(/^\//, '')}/${module}`);
    for (const candidate of candidates) {
      const rel = relativeDir(candidate);
      if (rel === undefined) continue;
      const found = await root.resolve(rel);
      if (!found.exists) continue;
      if (found.agentWritten) findings.push(`/${found.physical}: written by the agent, the module of the service ${service} the image's /etc/nsswitch.conf names: every user, group or host lookup of the verifier's processes would load it`);
      break;
    }
  }
  return { searches, findings };
}

function mostCommon(values: number[]): number | undefined {
  const counts = new Map<number, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  let best: number | undefined;
  for (const [v, n] of counts) if (best === undefined || n > (counts.get(best) ?? 0)) best = v;
  return best;
}
