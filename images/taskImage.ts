/**
 * A task's environment/Dockerfile as an image built on this host, and its
 * root filesystem extracted once into the cache for the local sandbox to use
 * as the read-only lower layer of every sandbox of that task.
 *
 * Build: each FROM image is replaced by a base made here (baseMap), a last
 * step installs what tests/test.sh would apt-get at verify time, and podman
 * builds it daemonless (runc; no bridge, no iptables, no ip_forward). The RUN
 * steps are third-party code: they run in a network namespace of the build's
 * own under a public sandbox's rules (buildNetwork.ts: the registries, never
 * this host's services) and within the project's caps on time, memory and
 * processes (buildLimits.ts), the log kept next to the image. Cached by content: the rewritten Dockerfile, every file of the
 * build context and the base images' ids. Two callers asking at once, in any
 * process of the host, build once (a file lock per key).
 */
import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ClassifiedError } from '../shared/failures.js';
import type { LoadedTask } from '../shared/task.js';
import { hashTree } from '../shared/hashTree.js';
import { baseForImage, DEBIAN_SUITES } from './baseMap.js';
import { CPYTHON_RELEASES, cpythonRelease, ensureCpythonSourceImage, type CpythonRelease } from './cpythonSource.js';
import { pythonRequestsOf, resolvePythonRequest } from './pythonRequests.js';
import { debianPythonSteps, stagePython, stagePythonRequests } from './buildPythons.js';
import { buildCgroupParent } from './buildProcesses.js';
import { buildLimits, capsHit, describeLimits, limitBuildCgroup, readCaps, runCgroup, timeoutReason, type CapReadings } from './buildLimits.js';
import { BUILD_DNS, withBuildNetwork } from './buildNetwork.js';
import { debianMirror, ensureBaseImage } from './baseImage.js';
import { parseDockerfile, rewriteFroms } from './dockerfile.js';
import { checkRunMounts } from './runMounts.js';
import { withBuildStorage } from './buildStorage.js';
import { withFileLock } from './fileLock.js';
import { imageExists, imageTools, runTool, runToolOk } from './imageTools.js';
import { ensureHostTrustImage, HOST_TRUST_BUNDLE_PATH, hostTrustSteps, type HostTrust } from './hostTrust.js';
import { ensureToolImage, type ToolImage } from './toolImages.js';
import { missingAptVersions, pinnedBeyondMirror } from './aptPins.js';
import { readVerifierNeeds } from './verifierNeeds.js';
import { VERIFIER_PYTHONS_DIR, verifierEnvironment, verifierPythonPrefix, verifierStep, type VerifierPython } from './verifierAdditions.js';
import { ensureWheelhouse } from './wheelhouse.js';

/** Bump when the way images are made changes, so old cache entries are not taken for new ones. */
const BUILDER_VERSION = 3;
export interface SubstitutedBase {
  /** The FROM line as the task wrote it. */
  from: string;
  /** What stands in for it. */
  substitute: string;
  baseImage: string;
  baseImageId: string;
  /** The host's CA certificates added to the base (so build steps reach HTTPS registries through this host's egress). */
  hostCertificates: string[];
  /** Where the original image's packages come from, when no registry here serves them (baseMap's originalArchive). */
  originalArchive?: string;
}

export interface TaskImage {
  /** Content key: sha256 over the rewritten Dockerfile, the build context and the bases. */
  key: string;
  tag: string;
  /** podman's image id (sha256 of the image config): the image digest in the experiment record. */
  imageId: string;
  /** Host directory holding the image's root filesystem (read-only lower layer of each sandbox). */
  rootfs: string;
  /** The image's WORKDIR ('/' when it sets none). */
  workdir: string;
  /** The image's ENV. */
  env: Record<string, string>;
  bases: SubstitutedBase[];
  /** Tool images `COPY --from` names, made here from a package registry (toolImages.ts); absent in older records. */
  toolImages?: ToolImage[];
  /** The host's CA bundle every stage got (hostTrust.ts); absent where the host has none, and in older records. */
  hostTrust?: HostTrust;
  /** What was added so tests/test.sh runs offline, unmodified. */
  verifier: {
    aptPackages: string[];
    requirements: string[];
    wheels: string[];
    wheelDir: string;
    uvVersion: string | null;
    uvDir: string | null;
    /** Pythons tests/test.sh asks uv for that the image lacks, built from source (absent in older records). */
    pythons?: string[];
    /** Environment the verifier's commands get on top of the image's. */
    env: Record<string, string>;
    notes: string[];
  };
  buildLog: string;
  buildMs: number;
  sizeBytes: number;
  builtAt: string;
}

export interface EnsuredImage {
  image: TaskImage;
  cacheHit: boolean;
  /** Time spent in this call (a hit: reading the record). */
  ms: number;
}

function envRecord(list: string[] | null | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of list ?? []) {
    const eq = entry.indexOf('=');
    if (eq > 0) out[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return out;
}

export async function ensureTaskImage(task: LoadedTask, options: { log?: (line: string) => void; env?: NodeJS.ProcessEnv } = {}): Promise<EnsuredImage> {
  const started = performance.now();
  const log = options.log ?? ((): void => undefined);
  const env = options.env ?? process.env;
  const dockerfile = join(task.environmentDir, 'Dockerfile');
  if (!existsSync(dockerfile)) throw new ClassifiedError('task', 'invalid_spec', `${task.dir}: environment/Dockerfile is missing; only Dockerfile tasks have an image to build`);
  const tools = imageTools(env);
  const limits = buildLimits(task, env);
  const parsed = parseDockerfile(readFileSync(dockerfile, 'utf8'), 'environment/Dockerfile');
  checkRunMounts(parsed.instructions, (i) => `${task.dir}/environment/Dockerfile:${parsed.lineOf[i] ?? '?'}`, task.environmentDir);
  const recipes = parsed.froms.map((f) => ({ from: f, recipe: baseForImage(f.image, `${task.dir}/${f.where}`, env) }));
  const needs = readVerifierNeeds(join(task.testsDir, 'test.sh'));
  const finalRecipe = recipes.at(-1)?.recipe;
  /** The image's own Python: the CPython a python:* base was built with, else the Debian release's python3. */
  const imagePython = finalRecipe ? (finalRecipe.cpython?.minor ?? DEBIAN_SUITES[finalRecipe.suite].python) : undefined;
  const notes: string[] = [];
  let needPython: string | undefined;
  const missingPythons: CpythonRelease[] = [];
  // Every Python the tests ask uv for, however they ask (pythonRequests.ts): the image's meets it, or
  // Harbor's uv would download a managed CPython from github.com, built here from source instead.
  const verifierPythons = new Set<string>(imagePython ? [imagePython] : []);
  for (const { request, where } of pythonRequestsOf(task.testsDir)) {
    const resolved = resolvePythonRequest(request, imagePython, Object.keys(CPYTHON_RELEASES));
    if (!resolved) {
      notes.push(`${where} asks uv for Python ${request}, but the image's Python is ${imagePython ?? '?'} and this builder makes none that meets it (${Object.keys(CPYTHON_RELEASES).join(', ')}); uv cannot download it offline`);
      continue;
    }
    if ('satisfiedByImage' in resolved) {
      if (!finalRecipe?.cpython) needPython = imagePython; // Debian's python3, installed by apt if the Dockerfile did not
      continue;
    }
    verifierPythons.add(resolved.build);
    if (missingPythons.some((p) => p.minor === resolved.build)) continue;
    try {
      missingPythons.push(cpythonRelease(resolved.patch ?? resolved.build, `${task.dir}/${where}`));
    } catch (err) {
      notes.push(err instanceof Error ? err.message : String(err));
    }
  }

  const mirror = debianMirror(env);
  const bases: SubstitutedBase[] = [];
  for (const { from, recipe } of recipes) {
    const base = await ensureBaseImage(tools, recipe, mirror, log);
    bases.push({
      from: from.where,
      substitute: recipe.substitute,
      baseImage: base.tag,
      baseImageId: base.id,
      hostCertificates: base.hostCertificates,
      ...(recipe.originalArchive ? { originalArchive: recipe.originalArchive } : {}),
    });
  }
  const toolImages: ToolImage[] = [];
  for (const copy of parsed.copyFroms) toolImages.push(await ensureToolImage(tools, copy.image, `${task.dir}/${copy.where}`, log));
  const toolTags = toolImages.map((t) => t.tag);
  const pythons: VerifierPython[] = [];
  for (const release of missingPythons) {
    const source = await ensureCpythonSourceImage(tools, release, env, log);
    pythons.push({ minor: release.minor, version: source.release.version, sourceImage: source.tag, prefix: verifierPythonPrefix(source.release.version) });
  }
  // Every stage on a base made here trusts what the host trusts, whatever tool it runs (hostTrust.ts).
  const trust = await ensureHostTrustImage(tools, env, log);
  const trustSteps = trust ? hostTrustSteps(trust) : undefined;
  // A stage whose uv steps need a Python its base lacks gets one (buildPythons.ts): Docker's uv would download it.
  const stageRequests = stagePythonRequests(parsed, task.environmentDir);
  const stageSteps: string[][] = [];
  for (const [i, { recipe }] of recipes.entries()) {
    const requests = stageRequests[i];
    const wanted = requests ? stagePython(requests, recipe.cpython?.minor, DEBIAN_SUITES[recipe.suite].python, Object.keys(CPYTHON_RELEASES)) : { kind: 'base' as const };
    const steps = [...(trustSteps ?? [])];
    if (wanted.kind === 'debian') steps.push(...debianPythonSteps());
    if (wanted.kind === 'none') notes.push(wanted.why);
    if (wanted.kind === 'build') {
      const source = await ensureCpythonSourceImage(tools, cpythonRelease(wanted.patch ?? wanted.minor, `${task.dir}/environment/Dockerfile`), env, log);
      steps.push(
        `COPY --from=${source.tag} / /usr/src/python`,
        `RUN sh /usr/src/python/build-cpython.sh ${verifierPythonPrefix(source.release.version)} && rm -rf /usr/src/python`,
        `ENV UV_PYTHON_INSTALL_DIR=${VERIFIER_PYTHONS_DIR}`,
      );
    }
    stageSteps.push(steps);
  }
  const rewritten = `${rewriteFroms(parsed, bases.map((b) => b.baseImage), toolTags, stageSteps)}\n${verifierStep(needs.aptPackages, needPython, pythons, parsed.finalUser)}`;
  const contextHash = hashTree(task.environmentDir);
  const key = createHash('sha256')
    .update(
      JSON.stringify({
        BUILDER_VERSION,
        rewritten,
        contextHash,
        bases: bases.map((b) => b.baseImageId),
        requirements: needs.requirements,
        uv: needs.usesUv ? tools.uvVersion : null,
        ...(toolImages.length > 0 ? { tools: toolImages.map((t) => t.imageId) } : {}),
      }),
    )
    .digest('hex');
  const dir = join(tools.cacheDir, 'tasks', key);
  const recordFile = join(dir, 'image.json');
  const tag = `localhost/rollout-task/${task.id.toLowerCase().replace(/[^a-z0-9._-]/g, '-')}:${key.slice(0, 20)}`;
  const cached = (): TaskImage | undefined => {
    if (!existsSync(recordFile) || !existsSync(join(dir, 'rootfs'))) return undefined;
    const now = new Date();
    utimesSync(recordFile, now, now); // last use, for `rollout env gc`
    const record = JSON.parse(readFileSync(recordFile, 'utf8')) as TaskImage;
    // Records written before originalArchive was kept get it from the recipes (same FROM lines: same key).
    record.bases = record.bases.map((b, i) => {
      const archive = recipes[i]?.recipe.originalArchive;
      return archive && !b.originalArchive ? { ...b, originalArchive: archive } : b;
    });
    return record;
  };
  const hit = cached();
  if (hit) return { image: hit, cacheHit: true, ms: performance.now() - started };

  return withFileLock(
    join(tools.cacheDir, 'locks', `task-${key}.lock`),
    async () => {
      const again = cached();
      if (again) return { image: again, cacheHit: true, ms: performance.now() - started };
      mkdirSync(dir, { recursive: true });
      const buildLog = join(dir, 'build.log');
      writeFileSync(join(dir, 'Dockerfile'), rewritten);
      writeFileSync(buildLog, `# ${task.dir}: podman build ${tag}\n`);
      log(`building ${tag} for ${task.id} (log ${buildLog}; ${describeLimits(limits)})`);
      const buildStarted = performance.now();
      const storageRun = (file: string, args: string[]): ReturnType<typeof runTool> => runTool(tools, file, args);
      // Under the storage's shared lock: a cleaner (buildStorage.ts) never takes this build's working containers for a dead one's.
      await withBuildStorage(tools, storageRun, async () => {
        if (await imageExists(tools, tag)) return;
        await withBuildNetwork(tools.env, async (network) => {
          // The RUN steps' containers go under a cgroup of this build's own, so they never outlive it (buildProcesses.ts), within the caps.
          const cgroupParent = buildCgroupParent();
          const notEnforced = limitBuildCgroup(cgroupParent, limits);
          appendFileSync(
            buildLog,
            `# network: a namespace of the build's own (slirp4netns, a public sandbox's routes, DNS ${BUILD_DNS}); caps: ${describeLimits(limits)}${notEnforced.map((n) => `; ${n}`).join('')}\n`,
          );
          let readings: CapReadings | undefined;
          const build = await runTool(
            tools,
            'podman',
            ['build', '--network', `ns:/proc/${network.pid}/ns/net`, '--dns', BUILD_DNS, '--pull=never', '--runtime', 'runc', '--cgroup-parent', runCgroup(cgroupParent), '--layers', '-f', join(dir, 'Dockerfile'), '-t', tag, task.environmentDir],
            { logFile: buildLog, timeoutMs: limits.timeoutSec * 1000, cgroupParent, beforeCgroupCleanup: () => (readings = readCaps(cgroupParent, limits)) },
          );
          if (build.code === 0) return;
          const capped = readings ? capsHit(readings, limits, build) : [];
          appendFileSync(buildLog, `# the build's cgroup at its end: ${JSON.stringify(readings ?? 'not read')}\n`);
          const why = build.timedOut ? timeoutReason(limits) : `failed (exit ${build.code})${capped.map((h) => `; ${h}`).join('')}`;
          // A version pinned from the original image's own archive (Ubuntu's), which the Debian stand-in does not have.
          const pins = build.timedOut ? [] : missingAptVersions(readFileSync(buildLog, 'utf8'));
          const pinned = pins.length > 0 ? `\n${pinnedBeyondMirror(pins, recipes.map(({ recipe }) => recipe))}` : '';
          throw new ClassifiedError('infra', 'provision_failed', `${task.dir}/environment/Dockerfile: the image build ${why}; full log: ${buildLog}${pinned}\n${build.tail}`);
        });
      });
      const buildMs = Math.round(performance.now() - buildStarted);
      const info = JSON.parse(await runToolOk(tools, 'podman', ['image', 'inspect', tag])) as { Id: string; Size: number; Config?: { Env?: string[]; WorkingDir?: string } }[];
      const meta = info[0];
      if (!meta) throw new ClassifiedError('infra', 'provision_failed', `podman image inspect ${tag} returned nothing`);
      const rootfs = join(dir, 'rootfs');
      const staging = `${rootfs}.partial`;
      rmSync(staging, { recursive: true, force: true });
      mkdirSync(staging);
      await withBuildStorage(tools, storageRun, async () => {
        const mounted = (await runToolOk(tools, 'podman', ['image', 'mount', tag])).trim();
        try {
          await runToolOk(tools, 'cp', ['-a', '--reflink=auto', `${mounted}/.`, `${staging}/`], { logFile: buildLog });
        } finally {
          await runTool(tools, 'podman', ['image', 'unmount', tag]);
        }
      });
      renameSync(staging, rootfs);
      const wheels = await ensureWheelhouse(tools, needs.requirements, [...verifierPythons].sort(), { image: tag, limits }, log, env);
      const imageEnv = envRecord(meta.Config?.Env);
      const verifierEnv = verifierEnvironment(imageEnv, pythons);
      const image: TaskImage = {
        key,
        tag,
        imageId: `sha256:${meta.Id.replace(/^sha256:/, '')}`,
        rootfs,
        workdir: meta.Config?.WorkingDir || '/',
        env: imageEnv,
        bases,
        ...(toolImages.length > 0 ? { toolImages } : {}),
        ...(trust ? { hostTrust: trust } : {}),
        verifier: {
          aptPackages: needs.aptPackages,
          requirements: needs.requirements,
          wheels: wheels.wheels,
          wheelDir: wheels.dir,
          uvVersion: needs.usesUv ? tools.uvVersion : null,
          uvDir: needs.usesUv ? tools.uvDir : null,
          env: verifierEnv,
          ...(pythons.length > 0 ? { pythons: pythons.map((p) => `CPython ${p.version} at ${p.prefix}`) } : {}),
          notes,
        },
        buildLog,
        buildMs,
        sizeBytes: meta.Size,
        builtAt: new Date().toISOString(),
      };
      writeFileSync(recordFile, `${JSON.stringify(image, null, 2)}\n`);
      log(`built ${tag} in ${(buildMs / 1000).toFixed(1)} s (${(meta.Size / 1e6).toFixed(0)} MB)`);
      return { image, cacheHit: false, ms: performance.now() - started };
    },
    () => log(`waiting for another build of ${tag} (same content) to finish`),
  );
}

/** The environment identity of the experiment record for an image-based sandbox. */
export function imageIdentity(image: TaskImage): string {
  const bases = image.bases.map((b) => `${b.from} -> ${b.substitute}${b.hostCertificates.length ? ` + host CA ${b.hostCertificates.join(',')}` : ''} [${b.baseImageId.slice(0, 19)}]`).join('; ');
  const v = image.verifier;
  const added = [
    v.aptPackages.length ? `apt ${v.aptPackages.join(',')}` : '',
    v.uvVersion ? `uv ${v.uvVersion} (PyPI)` : '',
    ...(v.pythons ?? []),
    v.wheels.length ? `wheels ${v.requirements.join(',')}` : '',
  ].filter(Boolean);
  const notes = v.notes.length > 0 ? `; builder notes: ${v.notes.join('; ')}` : '';
  const toolImages = (image.toolImages ?? []).map((t) => `; COPY --from=${t.original} -> ${t.substitute} [${t.imageId.slice(0, 19)}]`).join('');
  const trust = image.hostTrust
    ? `; host trust: ${image.hostTrust.source} (${image.hostTrust.certificates} certificates, sha256 ${image.hostTrust.sha256.slice(0, 16)}) at ${HOST_TRUST_BUNDLE_PATH}`
    : '';
  return `image:${image.imageId} built here; FROM ${bases}${toolImages}${trust}; verifier additions: ${added.join('; ') || 'none'}${notes}`;
}
