/**
 * The workflow bundle, built once per content and kept in the cache outside
 * the repository (rolloutCacheDir()/workflow-bundles/<key>.json). Bundling
 * (webpack + swc over the workflow code) costs seconds of CPU (3.0 s wall on
 * this 2-core machine at load 5, more when it is busier); every embedded start
 * and every worker start paid it. The key is the
 * sha256 of every source file the bundle can include (the given source
 * folders, recursively), the lock file (webpack, swc, zod and the SDK's own
 * workflow code), the SDK version and the bundler options: change any
 * workflow file and the next start builds a new bundle under a new key.
 */
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';

export interface WorkflowBundleCacheOptions {
  /** The bundle's entry point (workflowsPath of bundleWorkflowCode). */
  workflowsPath: string;
  /** Folders whose files the bundle can import (each read recursively; node_modules skipped). */
  sourceDirs: string[];
  /** Other files the build depends on (e.g. package-lock.json); a missing one counts as empty. */
  extraInputs: string[];
  /** Everything else that changes the output (bundler options); part of the key as JSON. */
  buildOptions: Record<string, unknown>;
  /** Folder of the cached bundles. */
  cacheDir: string;
  build: () => Promise<WorkflowBundleWithSourceMap>;
}

export interface CachedWorkflowBundle {
  bundle: WorkflowBundleWithSourceMap;
  key: string;
  path: string;
  /** True when this call bundled (no cached bundle of this content). */
  built: boolean;
}

const require = createRequire(import.meta.url);
/** The SDK version the bundle's runtime belongs to (a worker refuses a bundle of another one only at run time). */
export const SDK_VERSION = (require('@temporalio/worker/package.json') as { version: string }).version;

async function sourceFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries
    .filter((e) => e.isFile() && !join(e.parentPath, e.name).includes(`${'/'}node_modules${'/'}`))
    .map((e) => join(e.parentPath, e.name))
    .sort();
}

/** sha256 of the inputs of one bundle, as described above. */
export async function workflowBundleKey(options: Omit<WorkflowBundleCacheOptions, 'cacheDir' | 'build'>): Promise<string> {
  const hash = createHash('sha256');
  hash.update(JSON.stringify({ sdk: SDK_VERSION, entry: options.workflowsPath, options: options.buildOptions }));
  const root = dirname(options.workflowsPath);
  for (const dir of options.sourceDirs) {
    for (const file of await sourceFiles(dir)) {
      hash.update(`\0${relative(root, file)}\0`);
      hash.update(await readFile(file));
    }
  }
  for (const file of options.extraInputs) {
    hash.update(`\0${file}\0`);
    hash.update(await readFile(file).catch(() => Buffer.alloc(0)));
  }
  return hash.digest('hex');
}

function isBundle(value: unknown): value is WorkflowBundleWithSourceMap {
  return typeof value === 'object' && value !== null && typeof (value as { code?: unknown }).code === 'string' && typeof (value as { sourceMap?: unknown }).sourceMap === 'string';
}

/** The cached bundle of these sources, or a new one built and stored (atomically, so parallel starts never read half a file). */
export async function cachedWorkflowBundle(options: WorkflowBundleCacheOptions): Promise<CachedWorkflowBundle> {
  const key = await workflowBundleKey(options);
  const path = join(options.cacheDir, `${key}.json`);
  const cached = await readFile(path, 'utf8').then(
    (text): unknown => {
      try {
        return JSON.parse(text);
      } catch {
        return undefined; // a torn or foreign file: built again and replaced below
      }
    },
    () => undefined,
  );
  if (isBundle(cached)) return { bundle: { code: cached.code, sourceMap: cached.sourceMap }, key, path, built: false };
  const bundle = await options.build();
  const tmp = `${path}.${process.pid}.${Date.now()}.tmp`;
  try {
    await mkdir(options.cacheDir, { recursive: true });
    await writeFile(tmp, JSON.stringify({ code: bundle.code, sourceMap: bundle.sourceMap }));
    await rename(tmp, path);
    await pruneOldBundles(options.cacheDir, path);
  } catch {
    // A read-only or full cache only costs the next start its bundling again; this start has its bundle.
    await rm(tmp, { force: true }).catch(() => undefined);
  }
  return { bundle, key, path, built: true };
}

/** Bundles kept per cache folder: one per recent content (branches, edits), the oldest removed. */
const KEEP_BUNDLES = 8;

async function pruneOldBundles(dir: string, keep: string): Promise<void> {
  const names = (await readdir(dir)).filter((n) => n.endsWith('.json'));
  if (names.length <= KEEP_BUNDLES) return;
  const dated = await Promise.all(names.map(async (n) => ({ path: join(dir, n), mtimeMs: (await stat(join(dir, n))).mtimeMs })));
  dated.sort((a, b) => b.mtimeMs - a.mtimeMs);
  for (const old of dated.slice(KEEP_BUNDLES)) if (old.path !== keep) await rm(old.path, { force: true });
}
