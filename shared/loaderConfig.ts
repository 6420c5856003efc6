/**
 * What the dynamic loader and glibc read to decide which shared library a program loads by name: the
 * loader's cache (/etc/ld.so.cache, written by ldconfig), ldconfig's configuration (/etc/ld.so.conf and
 * what it includes: the directories the next ldconfig puts in the cache), the loader's default
 * directories, and the name service switch (/etc/nsswitch.conf: each service named there is a module,
 * libnss_<service>.so.2, that glibc loads by name on a user, group or host lookup).
 *
 * Pure parsers on bytes and relative paths ('usr/lib', no leading slash); sandboxes/local reads the files.
 */

/** One entry of the loader's cache: a library name (its soname) and the file the loader opens for it. */
export interface LoaderCacheEntry {
  name: string;
  path: string;
  /** The kind of library (ELF class and machine, as ldconfig's FLAG_*): the loader only takes entries of its own. */
  flags: number;
}

const NEW_MAGIC = 'glibc-ld.so.cache1.1';
const OLD_MAGIC = 'ld.so-1.7.0';
/** The new format's header (magic, nlibs, len_strings, flags, padding, extension_offset, unused[3]) and entry (flags, key, value, osversion, hwcap). */
const NEW_HEADER = 48;
const NEW_ENTRY = 24;
/** The old format's header (magic padded to 12, nlibs) and entry (flags, key, value). */
const OLD_HEADER = 16;
const OLD_ENTRY = 12;

function cString(bytes: Uint8Array, at: number): string | undefined {
  if (at < 0 || at >= bytes.length) return undefined;
  const end = bytes.indexOf(0, at);
  if (end < 0) return undefined;
  return Buffer.from(bytes.subarray(at, end)).toString('latin1');
}

function magicAt(bytes: Uint8Array, at: number, magic: string): boolean {
  return bytes.length >= at + magic.length && Buffer.from(bytes.subarray(at, at + magic.length)).toString('latin1') === magic;
}

function newFormatEntries(bytes: Uint8Array, start: number): LoaderCacheEntry[] | undefined {
  if (!magicAt(bytes, start, NEW_MAGIC) || bytes.length < start + NEW_HEADER) return undefined;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const count = view.getUint32(start + 20, true);
  if (start + NEW_HEADER + count * NEW_ENTRY > bytes.length) return undefined;
  const entries: LoaderCacheEntry[] = [];
  for (let i = 0; i < count; i++) {
    const at = start + NEW_HEADER + i * NEW_ENTRY;
    // String offsets of the new format count from the start of its header.
    const name = cString(bytes, start + view.getUint32(at + 4, true));
    const path = cString(bytes, start + view.getUint32(at + 8, true));
    if (name === undefined || path === undefined) return undefined;
    entries.push({ name, path, flags: view.getInt32(at, true) });
  }
  return entries;
}

/**
 * The entries of a loader cache as glibc reads it (the new format, alone or after the old one; the
 * old one alone), in the order the loader looks through them; undefined for bytes the loader
 * rejects as a cache (it then searches its default directories only).
 */
export function parseLoaderCache(bytes: Uint8Array): LoaderCacheEntry[] | undefined {
  if (magicAt(bytes, 0, NEW_MAGIC)) return newFormatEntries(bytes, 0);
  if (!magicAt(bytes, 0, OLD_MAGIC) || bytes.length < OLD_HEADER) return undefined;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const count = view.getUint32(12, true);
  const oldEnd = OLD_HEADER + count * OLD_ENTRY;
  if (oldEnd > bytes.length) return undefined;
  // The new format follows the old one aligned to 8 bytes, and is what glibc reads when present.
  const newStart = (oldEnd + 7) & ~7;
  const newer = newFormatEntries(bytes, newStart);
  if (newer) return newer;
  const entries: LoaderCacheEntry[] = [];
  for (let i = 0; i < count; i++) {
    const at = OLD_HEADER + i * OLD_ENTRY;
    // The old format's offsets count from the end of its entries (its string table).
    const name = cString(bytes, oldEnd + view.getUint32(at + 4, true));
    const path = cString(bytes, oldEnd + view.getUint32(at + 8, true));
    if (name === undefined || path === undefined) return undefined;
    entries.push({ name, path, flags: view.getInt32(at, true) });
  }
  return entries;
}

/** What one ldconfig configuration file says: directories, and the patterns of the files it includes. */
export interface LoaderConf {
  dirs: string[];
  includes: string[];
}

/** Parses ld.so.conf syntax: '#' comments, `include <glob>`, `hwcap ...` (ignored), else one or more directories per line. */
export function parseLoaderConf(text: string): LoaderConf {
  const dirs: string[] = [];
  const includes: string[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.replace(/#.*/, '').trim();
    if (line === '') continue;
    const include = /^include\s+(.+)$/.exec(line);
    if (include?.[1]) {
      includes.push(...include[1].split(/\s+/));
      continue;
    }
    if (/^hwcap\s/.test(line)) continue;
    // ldconfig splits a line on blanks, commas, colons and tabs; an old '=TYPE' suffix is ignored.
    for (const dir of line.split(/[\s,:]+/)) if (dir) dirs.push(dir.replace(/=.*$/, ''));
  }
  return { dirs, includes };
}

/** The services the name service switch names (`passwd: files systemd` -> files, systemd), in its order. */
export function nssServices(text: string): string[] {
  const services = new Set<string>();
  for (const raw of text.split('\n')) {
    const line = raw.replace(/#.*/, '');
    const colon = line.indexOf(':');
    if (colon < 0) continue;
    // Actions in brackets ([NOTFOUND=return]) are not services.
    for (const word of line.slice(colon + 1).replace(/\[[^\]]*\]/g, ' ').split(/\s+/)) if (/^[A-Za-z0-9_.-]+$/.test(word)) services.add(word);
  }
  return [...services];
}

/** The module glibc loads by name for a service of the name service switch. */
export function nssModule(service: string): string {
  return `libnss_${service}.so.2`;
}

/** The loader's own directories (searched when a name is not in the cache): lib*, usr/lib*, and their multiarch directories. */
const DEFAULT_DIR = /^(usr\/)?lib(32|64|x32)?(\/[a-z0-9_]+-linux-gnu[a-z0-9_]*)?$/;

export function isLoaderDefaultDir(dir: string): boolean {
  return DEFAULT_DIR.test(dir);
}

/**
 * The directory whose search covers `dir`: the loader also looks in a search directory's
 * glibc-hwcaps/<level> subdirectories (preferring them) and, before glibc 2.37, in its tls and
 * platform subdirectories; such a subdirectory stands for its parent.
 */
export function searchDirOf(dir: string): string {
  const hwcaps = /^(.*)\/glibc-hwcaps\/[^/]+$/.exec(dir);
  if (hwcaps?.[1]) return hwcaps[1];
  const legacy = /^(.*?)(\/(tls|haswell|x86_64|avx512_1|i686|sse2|i586|xeon_phi))+$/.exec(dir);
  if (legacy?.[1]) return legacy[1];
  return dir;
}

/** A path as the loader's configuration names it ('/usr/lib/', '/lib//x') to the form used here ('usr/lib', 'lib/x'); undefined when not absolute. */
export function relativeDir(path: string): string | undefined {
  if (!path.startsWith('/')) return undefined;
  const parts: string[] = [];
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') parts.pop();
    else parts.push(part);
  }
  return parts.join('/');
}
