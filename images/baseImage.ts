/**
 * Base images made here: mmdebstrap installs a Debian release from the mirror
 * this host reaches, and podman imports the tree as an image. Cached by the
 * recipe (release, packages, hooks, ENV, mirror): the image is named
 * localhost/rollout-base:<recipe hash>, so every task with the same base
 * shares it and a changed recipe makes a new one.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { aptSources } from './aptSources.js';
import type { BaseRecipe } from './baseMap.js';
import { cpythonBuildScript, ensureCpythonSource } from './cpythonSource.js';
import { withFileLock } from './fileLock.js';
import { imageExists, imageId, runToolOk, type ImageTools } from './imageTools.js';

export interface BaseImage {
  tag: string;
  /** podman's image id (sha256 of its config). */
  id: string;
  recipeHash: string;
  mirror: string;
  /** The host's extra CA certificates added to the base (file names), so build steps reach HTTPS registries. */
  hostCertificates: string[];
  buildMs: number;
}

export function debianMirror(env: NodeJS.ProcessEnv = process.env): string {
  return env.ROLLOUT_DEBIAN_MIRROR ?? 'http://deb.debian.org/debian';
}

/**
 * The host's own extra certificate authorities (Debian's /usr/local/share/ca-certificates, or
 * ROLLOUT_IMAGE_CA_DIR): where egress passes through a TLS-inspecting proxy, HTTPS from a build
 * step (pip from PyPI) fails without them. Copied into every base and recorded in its identity.
 */
export function hostCertificates(env: NodeJS.ProcessEnv = process.env): { dir: string; files: string[]; hash: string } {
  const dir = env.ROLLOUT_IMAGE_CA_DIR ?? '/usr/local/share/ca-certificates';
  const files = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.crt')).sort() : [];
  const hash = createHash('sha256');
  for (const f of files) hash.update(`${f}\0`).update(readFileSync(join(dir, f))).update('\0');
  return { dir, files, hash: hash.digest('hex') };
}

export function recipeHash(recipe: BaseRecipe, mirror: string, certificates = hostCertificates()): string {
  const { suite, packages, customize, env, cpython, aptSourcesFile } = recipe;
  const python = cpython ? { version: cpython.version, script: createHash('sha256').update(cpythonBuildScript()).digest('hex') } : undefined;
  return createHash('sha256')
    .update(
      JSON.stringify({
        suite,
        packages: [...packages].sort(),
        customize,
        env,
        mirror,
        variant: 'minbase',
        certificates: certificates.hash,
        certificateEnv: hostCertificateEnv(recipe, certificates),
        sources: aptSources(recipe, mirror),
        ...(aptSourcesFile ? { aptSourcesFile } : {}),
        ...(python ? { python } : {}),
      }),
    )
    .digest('hex');
}

function certificateHook(certificates: ReturnType<typeof hostCertificates>): string[] {
  if (certificates.files.length === 0) return [];
  const copies = certificates.files.map((f) => `cp ${JSON.stringify(join(certificates.dir, f))} "$1/usr/local/share/ca-certificates/"`).join(' && ');
  // Bases without the ca-certificates package get the files only; installing the package later picks them up.
  return [`mkdir -p "$1/usr/local/share/ca-certificates" && ${copies} && { [ ! -x "$1/usr/sbin/update-ca-certificates" ] || chroot "$1" update-ca-certificates; }`];
}

/**
 * A CPython built here has pip's own certificate bundle (certifi), not Debian's store: pip older than
 * 24.2 (3.9-3.11's ensurepip) then cannot reach PyPI through a TLS-inspecting egress. Where host
 * certificates were added, pip is pointed at the store that holds them (recorded with them).
 */
function hostCertificateEnv(recipe: BaseRecipe, certificates: ReturnType<typeof hostCertificates>): string[] {
  return recipe.cpython && certificates.files.length > 0 ? ['PIP_CERT=/etc/ssl/certs/ca-certificates.crt'] : [];
}

export async function ensureBaseImage(tools: ImageTools, recipe: BaseRecipe, mirror: string, log: (line: string) => void = () => undefined): Promise<BaseImage> {
  const certificates = hostCertificates();
  const hash = recipeHash(recipe, mirror, certificates);
  const dir = join(tools.cacheDir, 'bases');
  const recordFile = join(dir, `${hash}.json`);
  const tag = `localhost/rollout-base:${hash.slice(0, 20)}`;
  const cached = async (): Promise<BaseImage | undefined> => {
    if (!existsSync(recordFile) || !(await imageExists(tools, tag))) return undefined;
    return JSON.parse(readFileSync(recordFile, 'utf8')) as BaseImage;
  };
  const hit = await cached();
  if (hit) return hit;
  mkdirSync(dir, { recursive: true });
  return withFileLock(join(tools.cacheDir, 'locks', `base-${hash}.lock`), async () => {
    const again = await cached();
    if (again) return again;
    const started = performance.now();
    const tarball = join(dir, `${hash}.tar`);
    const logFile = join(dir, `${hash}.log`);
    rmSync(tarball, { force: true });
    log(`making base ${tag}: ${recipe.substitute} (mmdebstrap ${recipe.suite} from ${mirror}; log ${logFile})`);
    const args = ['--variant=minbase', '--mode=root', '--format=tar'];
    if (recipe.packages.length > 0) args.push(`--include=${recipe.packages.join(',')}`);
    // CPython from source: the tree is copied in and built by the release's own compiler, inside the root.
    const cpython = recipe.cpython ? await ensureCpythonSource(tools, recipe.cpython, process.env, log) : undefined;
    const pythonHook = cpython ? [`cp -a ${JSON.stringify(cpython.dir)} "$1/usr/src/python" && chroot "$1" sh /usr/src/python/build-cpython.sh /usr/local`] : [];
    if (cpython) log(`CPython ${cpython.release.version} (source sha256 ${cpython.release.sha256.slice(0, 16)}) is built into the base: a few minutes, once`);
    const sources = aptSources(recipe, mirror);
    for (const hook of [sources.hook, ...recipe.customize, ...pythonHook, ...certificateHook(certificates)]) args.push(`--customize-hook=${hook}`);
    args.push(recipe.suite, tarball, ...sources.mirrors);
    try {
      await runToolOk(tools, 'mmdebstrap', args, { logFile, timeoutMs: 30 * 60_000 });
      const changes = [...recipe.env, ...hostCertificateEnv(recipe, certificates)].flatMap((e) => ['--change', `ENV ${e}`]);
      await runToolOk(tools, 'podman', ['import', ...changes, '--change', 'CMD ["bash"]', tarball, tag], { logFile });
    } finally {
      rmSync(tarball, { force: true });
    }
    const base: BaseImage = { tag, id: await imageId(tools, tag), recipeHash: hash, mirror, hostCertificates: certificates.files, buildMs: Math.round(performance.now() - started) };
    writeFileSync(recordFile, `${JSON.stringify(base, null, 2)}\n`);
    log(`base ${tag} made in ${(base.buildMs / 1000).toFixed(1)} s`);
    return base;
  });
}
