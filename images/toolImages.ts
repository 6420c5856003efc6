/**
 * Tool images that a Dockerfile copies files out of (`COPY --from=ghcr.io/astral-sh/uv:0.8.14
 * /uv /uvx /bin/`) cannot be pulled here, but several publish the same files on a package
 * registry: uv's binaries are in its PyPI wheel. Each known one is made here as a `FROM scratch`
 * image holding those files where the original has them, tagged localhost/rollout-tool/<name>:<version>,
 * once per version (podman's storage is the cache). The task's Dockerfile then copies from it.
 * A tool image no rule knows is a task/invalid_spec error that names the line and the fix.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ClassifiedError } from '../shared/failures.js';
import { withBuildStorage } from './buildStorage.js';
import { withFileLock } from './fileLock.js';
import { imageExists, imageId, runTool, runToolOk, type ImageTools } from './imageTools.js';
import { MACHINE, pipPython } from './wheelhouse.js';

/** A tool image made from a registry package: which package, which of its files go where in the image. */
interface ToolRule {
  /** Matches the image reference; group 1 is the version. */
  match: RegExp;
  name: string;
  /** The references it makes, in words, for errors. */
  example: string;
  /** The PyPI requirement for a version. */
  pypi: (version: string) => string;
  /** Path in the image -> how to recognise the file in the wheel (its path ends with it). */
  files: Record<string, string>;
  describe: (version: string) => string;
}

const TOOL_RULES: ToolRule[] = [
  {
    match: /^ghcr\.io\/astral-sh\/uv:(\d+\.\d+\.\d+)$/,
    name: 'uv',
    example: 'ghcr.io/astral-sh/uv:<version>',
    pypi: (v) => `uv==${v}`,
    files: { uv: '/scripts/uv', uvx: '/scripts/uvx' },
    describe: (v) => `uv ${v} from PyPI (its wheel's uv and uvx at / as in ghcr.io/astral-sh/uv)`,
  },
];

export interface ToolImage {
  /** As the Dockerfile names it. */
  original: string;
  /** The local image the COPY now reads. */
  tag: string;
  imageId: string;
  /** What was made, in words, for the experiment record. */
  substitute: string;
}

/** The rule for a COPY --from image, or an error naming the line and what is known. */
function ruleFor(image: string, where: string): { rule: ToolRule; version: string } {
  for (const rule of TOOL_RULES) {
    const m = rule.match.exec(image);
    if (m) return { rule, version: m[1] as string };
  }
  throw new ClassifiedError(
    'task',
    'invalid_spec',
    `${where}: the image ${image} cannot be pulled here and no rule makes it from a package registry (known: ${TOOL_RULES.map((r) => r.example).join(', ')}). Fix: install the tool in a RUN step from a package registry (pip, apt), or copy it from an earlier stage of the Dockerfile`,
  );
}

/** Makes (once) the local stand-in of a tool image that `COPY --from` names. */
export async function ensureToolImage(tools: ImageTools, image: string, where: string, log: (line: string) => void = () => undefined): Promise<ToolImage> {
  const { rule, version } = ruleFor(image, where);
  const tag = `localhost/rollout-tool/${rule.name}:${version}`;
  const substitute = rule.describe(version);
  if (await imageExists(tools, tag)) return { original: image, tag, imageId: await imageId(tools, tag), substitute };
  return withFileLock(join(tools.cacheDir, 'locks', `tool-${rule.name}-${version}.lock`), async () => {
    if (await imageExists(tools, tag)) return { original: image, tag, imageId: await imageId(tools, tag), substitute };
    const work = mkdtempSync(join(tools.cacheDir, `tool-${rule.name}-`));
    try {
      log(`making ${tag} for COPY --from=${image}: ${substitute}`);
      const python = await pipPython(tools);
      const platforms = [`manylinux_2_17_${MACHINE}`, `manylinux2014_${MACHINE}`];
      await runToolOk(
        tools,
        python,
        [
          '-m',
          'pip',
          'download',
          '--disable-pip-version-check',
          '--quiet',
          '--no-deps',
          '--only-binary',
          ':all:',
          ...platforms.flatMap((p) => ['--platform', p]),
          '--python-version',
          '3.11',
          '--dest',
          join(work, 'wheel'),
          rule.pypi(version),
        ],
        { timeoutMs: 10 * 60_000 },
      );
      // The wheel is a zip: take the files the rule names out of it, executable, into the build context.
      const extract = `import sys, zipfile, glob, os
wanted = dict(a.split('=', 1) for a in sys.argv[2:])
[wheel] = glob.glob(os.path.join(sys.argv[1], 'wheel', '*.whl'))
with zipfile.ZipFile(wheel) as z:
    for target, suffix in wanted.items():
        [name] = [n for n in z.namelist() if n.endswith(suffix)]
        out = os.path.join(sys.argv[1], 'context', target)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, 'wb') as f: f.write(z.read(name))
        os.chmod(out, 0o755)`;
      await runToolOk(tools, python, ['-c', extract, work, ...Object.entries(rule.files).map(([target, suffix]) => `${target}=${suffix}`)]);
      const containerfile = ['FROM scratch', ...Object.keys(rule.files).map((target) => `COPY ${target} /${target}`), ''].join('\n');
      writeFileSync(join(work, 'Containerfile'), containerfile);
      await withBuildStorage(tools, (file, args) => runTool(tools, file, args), async () => {
        await runToolOk(tools, 'podman', ['build', '--pull=never', '--network', 'none', '-f', join(work, 'Containerfile'), '-t', tag, join(work, 'context')], { timeoutMs: 10 * 60_000 });
      });
      return { original: image, tag, imageId: await imageId(tools, tag), substitute };
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
}
