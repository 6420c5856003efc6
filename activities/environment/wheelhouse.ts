/**
 * A directory of wheels for a verifier's pinned requirements and their
 * dependencies, downloaded from PyPI at build time by the host's pip for the
 * image's interpreter (binary wheels for its Python version and glibc);
 * requirements published only as source are built into wheels here. Cached by
 * (requirements, Python versions, machine).
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { arch } from 'node:os';
import { join } from 'node:path';
import { ClassifiedError } from '../../shared/failures.js';
import { withFileLock } from './fileLock.js';
import { runTool, type ImageTools } from './imageTools.js';

export const MACHINE = arch() === 'arm64' ? 'aarch64' : 'x86_64';
/** glibc 2.36 (bookworm) and 2.41 (trixie) run every manylinux wheel up to their own version. */
const PLATFORMS = [...Array.from({ length: 25 }, (_, i) => `manylinux_2_${41 - i}_${MACHINE}`), `manylinux2014_${MACHINE}`, `manylinux2010_${MACHINE}`, `manylinux1_${MACHINE}`, `linux_${MACHINE}`];

/** The host's python3 that has pip (for downloads from PyPI at build time). */
export async function pipPython(tools: ImageTools): Promise<string> {
  for (const python of ['python3', '/usr/bin/python3']) if ((await runTool(tools, python, ['-m', 'pip', '--version'])).code === 0) return python;
  throw new ClassifiedError('infra', 'capability_missing', 'no python3 with pip on this host to download verifier wheels. Fix: apt-get install python3-pip (scripts/ensure-image-tools.sh does)');
}

export async function ensureWheelhouse(tools: ImageTools, requirements: string[], pythons: string[], log: (line: string) => void = () => undefined): Promise<{ dir: string; wheels: string[] }> {
  const key = createHash('sha256').update(JSON.stringify({ requirements, pythons, MACHINE })).digest('hex').slice(0, 24);
  const dir = join(tools.cacheDir, 'wheels', key);
  const list = (): string[] => readdirSync(dir).filter((f) => f.endsWith('.whl')).sort();
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
    const common = ['-m', 'pip', 'download', '--disable-pip-version-check', '--dest', staging, '--only-binary', ':all:', '--implementation', 'cp'];
    for (const py of pythons) {
      const abi = `cp${py.replace('.', '')}`;
      const target = [...common, '--python-version', py, '--abi', abi, '--abi', 'abi3', '--abi', 'none', ...PLATFORMS.flatMap((p) => ['--platform', p])];
      const all = await runTool(tools, python, [...target, ...requirements], { logFile, timeoutMs: 20 * 60_000 });
      if (all.code === 0) continue;
      // One of them has no wheel (a pure-Python sdist such as chess): build that one here, fetch the rest as wheels.
      for (const req of requirements) {
        if ((await runTool(tools, python, [...target, req], { logFile, timeoutMs: 20 * 60_000 })).code === 0) continue;
        const built = await runTool(tools, python, ['-m', 'pip', 'wheel', '--disable-pip-version-check', '--no-deps', '--wheel-dir', staging, req], { logFile, timeoutMs: 20 * 60_000 });
        if (built.code !== 0) {
          throw new ClassifiedError('infra', 'provision_failed', `cannot provide ${req} for the verifier (Python ${py}): no wheel on PyPI and building one failed; log ${logFile}: ${built.tail.slice(-1500)}`);
        }
      }
    }
    rmSync(dir, { recursive: true, force: true });
    renameSync(staging, dir);
    writeFileSync(join(dir, '.complete'), `${requirements.join('\n')}\n`);
    return { dir, wheels: list() };
  });
}
