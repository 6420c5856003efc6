/**
 * The base map: which Debian system made here stands in for a Dockerfile's
 * FROM image, since registries are out of reach. The default rules:
 *
 *   python:3.X[.Y][-slim][-bookworm|-trixie]  the Debian release whose python3 is 3.X
 *                                             (bookworm 3.11, trixie 3.13) + pip, venv,
 *                                             python-is-python3; pip installs system-wide
 *                                             as in the official image (no PEP 668 marker),
 *                                             pip upgradable, site-packages in /usr/local
 *   debian:12[.N][-slim], debian:bookworm     bookworm
 *   debian:13[.N][-slim], debian:trixie       trixie
 *   ubuntu:24.04 / noble                      trixie (substituted: the nearest Debian)
 *   ubuntu:22.04 / jammy                      bookworm (substituted)
 *
 * ROLLOUT_BASE_MAP names a JSON file of more rules, tried before these:
 *   [{ "match": "^myorg/py:3\\.13$", "suite": "trixie", "packages": ["python3"], "note": "..." }]
 * A FROM no rule matches is a task/invalid_spec error naming the line and this fix.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ClassifiedError } from '../../shared/failures.js';

export const DEBIAN_SUITES = { bookworm: { version: '12', python: '3.11' }, trixie: { version: '13', python: '3.13' } } as const;
export type DebianSuite = keyof typeof DEBIAN_SUITES;

export interface BaseRecipe {
  /** The Debian release mmdebstrap installs. */
  suite: DebianSuite;
  /** Packages on top of minbase. */
  packages: string[];
  /** Shell run on the finished tree (mmdebstrap --customize-hook, "$1" is its root). */
  customize: string[];
  /** ENV of the image, as Docker's "NAME=value". */
  env: string[];
  /** What was substituted, in words, for the experiment record. */
  substitute: string;
  /**
   * The Debian release the FROM line named when another one stands in for it (python:3.13-slim-bookworm
   * is made from trixie): a package the task's build asks for that `suite` no longer has (a transitional
   * name dropped in trixie, libgl1-mesa-glx) is installed from it, pinned below `suite` (taskImage.ts).
   */
  aptFallback?: DebianSuite;
  /**
   * Where the original image's packages come from when that is not a registry this machine reaches
   * (Ubuntu's archive): a Dockerfile that pins one of its package versions cannot be built here.
   */
  originalArchive?: string;
}

const PATH_WITH_LOCAL = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** The official python image has its headers (Python.h) too: C extensions built in a task need them. */
const PYTHON_PACKAGES = ['python3', 'python3-dev', 'python3-pip', 'python3-venv', 'python-is-python3', 'ca-certificates'];

/**
 * What makes Debian's python3 behave like the official python image for what Dockerfiles do with it:
 * no PEP 668 marker (pip installs system-wide); pip installed by pip itself into /usr/local, with the
 * RECORD file Debian's packaged pip lacks, so `pip install --upgrade pip` replaces it instead of
 * failing ("Cannot uninstall pip ... installed by debian"), and the `pip` on PATH is that one; and
 * /usr/local/lib/python3.X/site-packages, where the official image keeps installed packages, leading
 * to Debian's dist-packages there.
 */
const PYTHON_LIKE_THE_OFFICIAL_IMAGE = [
  'rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED',
  'chroot "$1" python3 -m pip install --quiet --disable-pip-version-check --no-index --find-links /usr/share/python-wheels --ignore-installed pip',
  'v=$(chroot "$1" python3 -c "import sys; print(\'%d.%d\' % sys.version_info[:2])") && mkdir -p "$1/usr/local/lib/python$v/dist-packages" && ln -sfn dist-packages "$1/usr/local/lib/python$v/site-packages"',
];

const UserRuleSchema = z.array(
  z
    .object({
      match: z.string().min(1),
      suite: z.enum(['bookworm', 'trixie']),
      packages: z.array(z.string().regex(/^[a-z0-9][a-z0-9+.-]*$/)).default([]),
      env: z.array(z.string().includes('=')).default([]),
      note: z.string().optional(),
    })
    .strict(),
);

function suiteForPython(from: string, version: string): DebianSuite {
  const suite = (Object.keys(DEBIAN_SUITES) as DebianSuite[]).find((s) => DEBIAN_SUITES[s].python === version);
  if (!suite) {
    const have = Object.entries(DEBIAN_SUITES).map(([s, v]) => `${s} ${v.python}`).join(', ');
    throw new ClassifiedError('task', 'invalid_spec', `FROM ${from}: no Debian release here ships Python ${version} (${have}). Fix: use python:3.11 or python:3.13 in the Dockerfile, or add a rule to ROLLOUT_BASE_MAP`);
  }
  return suite;
}

function builtIn(image: string, from: string): BaseRecipe | undefined {
  const python = /^python:(3\.\d+)(?:\.\d+)?(?:-slim)?(?:-(bookworm|trixie|bullseye))?$/.exec(image);
  if (python) {
    const version = python[1] as string;
    const suite = suiteForPython(from, version);
    const named = python[2];
    const release = named && named !== suite ? ` (not ${named}, whose Python is not ${version})` : '';
    return {
      suite,
      packages: PYTHON_PACKAGES,
      customize: PYTHON_LIKE_THE_OFFICIAL_IMAGE,
      env: [PATH_WITH_LOCAL, 'LANG=C.UTF-8'],
      substitute: `Debian ${suite} minbase with Debian's python3 ${version} (headers, pip, venv; pip upgradable and site-packages in /usr/local as in the official image)${release}`,
      ...(named && named !== suite && named in DEBIAN_SUITES ? { aptFallback: named as DebianSuite } : {}),
    };
  }
  const debian = /^debian:(12|13|bookworm|trixie)(?:\.\d+)*(?:-slim)?$/.exec(image);
  if (debian) {
    const suite: DebianSuite = debian[1] === '12' || debian[1] === 'bookworm' ? 'bookworm' : 'trixie';
    return { suite, packages: [], customize: [], env: [PATH_WITH_LOCAL], substitute: `Debian ${suite} minbase` };
  }
  const ubuntu = /^ubuntu:(24\.04|noble|22\.04|jammy)$/.exec(image);
  if (ubuntu) {
    const suite: DebianSuite = ubuntu[1] === '24.04' || ubuntu[1] === 'noble' ? 'trixie' : 'bookworm';
    return { suite, packages: ['ca-certificates'], customize: [], env: [PATH_WITH_LOCAL], substitute: `Debian ${suite} minbase in place of Ubuntu ${ubuntu[1]} (no Ubuntu mirror here; package names mostly agree)`, originalArchive: 'archive.ubuntu.com' };
  }
  return undefined;
}

function userRules(env: NodeJS.ProcessEnv): z.infer<typeof UserRuleSchema> {
  const file = env.ROLLOUT_BASE_MAP;
  if (!file) return [];
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ClassifiedError('infra', 'capability_missing', `ROLLOUT_BASE_MAP=${file}: cannot read it as JSON (${err instanceof Error ? err.message : String(err)}). Fix: point it at a JSON array of {match, suite, packages}`);
  }
  const parsed = UserRuleSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ClassifiedError('infra', 'capability_missing', `ROLLOUT_BASE_MAP=${file}: [${issue?.path.join('.')}] ${issue?.message}. Fix: each rule is {"match": regex, "suite": "bookworm"|"trixie", "packages": [...], "env": ["K=V"], "note": "..."}`);
  }
  return parsed.data;
}

/** The image name without a docker.io/library/ prefix and with `:latest` for a bare name. */
export function normalizeImage(image: string): string {
  let name = image.replace(/^(docker\.io|index\.docker\.io)\//, '').replace(/^library\//, '');
  if (!/:[^/]+$/.test(name) && !name.includes('@')) name += ':latest';
  return name;
}

/** The base recipe for a FROM image; `line` names where it came from in errors. */
export function baseForImage(image: string, line: string, env: NodeJS.ProcessEnv = process.env): BaseRecipe {
  const name = normalizeImage(image);
  for (const rule of userRules(env)) {
    if (new RegExp(rule.match).test(name)) {
      return { suite: rule.suite, packages: rule.packages, customize: [], env: rule.env.length > 0 ? rule.env : [PATH_WITH_LOCAL], substitute: rule.note ?? `Debian ${rule.suite} minbase (ROLLOUT_BASE_MAP rule ${rule.match})` };
    }
  }
  const recipe = builtIn(name, line);
  if (recipe) return recipe;
  throw new ClassifiedError(
    'task',
    'invalid_spec',
    `${line}: the image ${image} cannot be pulled here and no base-map rule makes it from Debian. Fix: use python:3.11/3.13[-slim][-bookworm|-trixie], debian:12/13[-slim] or ubuntu:24.04 as the base, or add a rule for it to the JSON file ROLLOUT_BASE_MAP names`,
  );
}
