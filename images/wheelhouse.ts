/**
 * A directory of wheels for a verifier's pinned requirements and their
 * dependencies, downloaded from PyPI at build time by the host's pip for the
 * image's interpreter (binary wheels for its Python version and glibc: `pip
 * download --only-binary :all:` runs no code of a package). A requirement
 * published only as source is third-party code (its setup.py, its build
 * backend): it is built into a wheel inside a container of the task's own
 * image, in a build network (buildNetwork.ts) and under the build caps
 * (buildLimits.ts), with all capabilities dropped; only the regular .whl files
 * it wrote come out. ROLLOUT_PIP_INDEX_URL / ROLLOUT_PIP_EXTRA_INDEX_URL name a
 * mirror. Cached by (requirements, Python versions, machine).
 */
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { arch } from 'node:os';
import { join } from 'node:path';
import { ClassifiedError } from '../shared/failures.js';
import { withFileLock } from './fileLock.js';
import { runTool, type ImageTools, type RunResult } from './imageTools.js';
import { buildCgroupParent } from './buildProcesses.js';
import { capsHit, limitBuildCgroup, readCaps, runCgroup, type BuildLimits, type CapReadings } from './buildLimits.js';
import { BUILD_DNS, withBuildNetwork } from './buildNetwork.js';
import { withBuildStorage } from './buildStorage.js';

/** Where a source-only requirement is built: a container of this image, within these caps. */
export interface WheelBuilder {
  image: string;
  limits: BuildLimits;
}

/** pip's index options from ROLLOUT_PIP_INDEX_URL / ROLLOUT_PIP_EXTRA_INDEX_URL (a mirror; PyPI otherwise). */
export function pipIndexArgs(env: NodeJS.ProcessEnv = process.env): string[] {
  const args: string[] = [];
  for (const [flag, name] of [['--index-url', 'ROLLOUT_PIP_INDEX_URL'], ['--extra-index-url', 'ROLLOUT_PIP_EXTRA_INDEX_URL']] as const) {
    const url = env[name];
    if (!url) continue;
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new ClassifiedError('infra', 'capability_missing', `${name} = ${JSON.stringify(url)} is not a URL; set it to a PEP 503 index such as https://mirror.example/simple`);
    }
    args.push(flag, url);
    // A plain-http mirror (an internal one) is one pip must be told to trust; the operator named it.
    if (parsed.protocol === 'http:') args.push('--trusted-host', parsed.hostname);
  }
  return args;
}

/**
 * `pip wheel --no-deps REQ` in a container of the task's image: no host process runs the
 * package's code. The container sees only an empty output directory; what it leaves there is
 * taken only as regular files named *.whl.
 */
async function buildWheelInContainer(tools: ImageTools, builder: WheelBuilder, req: string, staging: string, logFile: string, index: string[]): Promise<RunResult & { why: string[] }> {
  const out = mkdtempSync(join(staging, '..', '.sdist-build-'));
  const storageRun = (file: string, args: string[]): Promise<RunResult> => runTool(tools, file, args);
  try {
    const result = await withBuildStorage(tools, storageRun, () =>
      withBuildNetwork(tools.env, async (network) => {
        const cgroupParent = buildCgroupParent();
        const notEnforced = limitBuildCgroup(cgroupParent, builder.limits);
        let readings: CapReadings | undefined;
        const args = ['run', '--rm', '--pull=never', '--runtime', 'runc', '--network', `ns:/proc/${network.pid}/ns/net`, '--dns', BUILD_DNS, '--cgroup-parent', runCgroup(cgroupParent), '--cap-drop', 'all', '--security-opt', 'no-new-privileges', '--user', '0:0', '--workdir', '/tmp', '-v', `${out}:/wheelhouse:rw`, '--entrypoint', 'python3', builder.image, '-m', 'pip', 'wheel', '--disable-pip-version-check', '--no-deps', '--wheel-dir', '/wheelhouse', ...index, req];
        const run = await runTool(tools, 'podman', args, {
          logFile,
          timeoutMs: builder.limits.timeoutSec * 1000,
          cgroupParent,
          beforeCgroupCleanup: () => (readings = readCaps(cgroupParent, builder.limits)),
        });
        const capped = readings && run.code !== 0 ? capsHit(readings, builder.limits, run) : [];
        return { ...run, why: [...notEnforced, ...capped, ...(run.timedOut ? [`ran past ${builder.limits.timeoutSec} s`] : [])] };
      }),
    );
    if (result.code === 0) {
      for (const name of readdirSync(out)) {
        const file = join(out, name);
        if (name.endsWith('.whl') && lstatSync(file).isFile()) copyFileSync(file, join(staging, name));
      }
    }
    return result;
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

export const MACHINE = arch() === 'arm64' ? 'aarch64' : 'x86_64';
/** glibc 2.36 (bookworm) and 2.41 (trixie) run every manylinux wheel up to their own version. */
const PLATFORMS = [...Array.from({ length: 25 }, (_, i) => `manylinux_2_${41 - i}_${MACHINE}`), `manylinux2014_${MACHINE}`, `manylinux2010_${MACHINE}`, `manylinux1_${MACHINE}`, `linux_${MACHINE}`];

/** The host's python3 that has pip (for downloads from PyPI at build time). */
export async function pipPython(tools: ImageTools): Promise<string> {
  for (const python of ['python3', '/usr/bin/python3']) if ((await runTool(tools, python, ['-m', 'pip', '--version'])).code === 0) return python;
  throw new ClassifiedError('infra', 'capability_missing', 'no python3 with pip on this host to download verifier wheels. Fix: apt-get install python3-pip (scripts/ensure-image-tools.sh does)');
}

export async function ensureWheelhouse(
  tools: ImageTools,
  requirements: string[],
  pythons: string[],
  builder: WheelBuilder,
  log: (line: string) => void = () => undefined,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ dir: string; wheels: string[] }> {
  const key = createHash('sha256').update(JSON.stringify({ requirements, pythons, MACHINE })).digest('hex').slice(0, 24);
  const dir = join(tools.cacheDir, 'wheels', key);
  const list = (): string[] =>
    readdirSync(dir)
      .filter((f) => f.endsWith('.whl'))
      .sort();
  if (existsSync(join(dir, '.complete'))) return { dir, wheels: list() };
  if (requirements.length === 0) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, '.complete'), '');
    return { dir, wheels: [] };
  }
  return withFileLock(join(tools.cacheDir, 'locks', `wheels-${key}.lock`), async () => {
    if (existsSync(join(dir, '.complete'))) return { dir, wheels: list() };
    const python = await pipPython(tools);
    const staging = `${dir}.partial`;
    rmSync(staging, { recursive: true, force: true });
    mkdirSync(staging, { recursive: true });
    const logFile = join(`${dir}.log`);
    log(`downloading verifier wheels (${requirements.join(' ')}) for Python ${pythons.join(', ')} into ${dir}`);
    const index = pipIndexArgs(env);
    const common = ['-m', 'pip', 'download', '--disable-pip-version-check', '--dest', staging, '--only-binary', ':all:', '--implementation', 'cp', ...index];
    for (const py of pythons) {
      const abi = `cp${py.replace('.', '')}`;
      const target = [...common, '--python-version', py, '--abi', abi, '--abi', 'abi3', '--abi', 'none', ...PLATFORMS.flatMap((p) => ['--platform', p])];
      const all = await runTool(tools, python, [...target, ...requirements], { logFile, timeoutMs: 20 * 60_000 });
      if (all.code === 0) continue;
      // One of them has no wheel (a pure-Python sdist such as chess): build that one in a container, fetch the rest as wheels.
      for (const req of requirements) {
        if ((await runTool(tools, python, [...target, req], { logFile, timeoutMs: 20 * 60_000 })).code === 0) continue;
        log(`${req} has no wheel for Python ${py}: building it in a container of ${builder.image}`);
        const built = await buildWheelInContainer(tools, builder, req, staging, logFile, index);
        if (built.code !== 0) {
          const why = built.why.length > 0 ? ` (${built.why.join('; ')})` : '';
          throw new ClassifiedError(
            'infra',
            'provision_failed',
            `cannot provide ${req} for the verifier (Python ${py}): no wheel on the index, and building one in a container of ${builder.image} failed${why}; log ${logFile}: ${built.tail.slice(-1500)}`,
          );
        }
      }
    }
    rmSync(dir, { recursive: true, force: true });
    renameSync(staging, dir);
    writeFileSync(join(dir, '.complete'), `${requirements.join('\n')}\n`);
    return { dir, wheels: list() };
  });
}
