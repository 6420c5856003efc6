/**
 * The base map: which Debian system made here stands in for a Dockerfile's
 * FROM image, since registries are out of reach. The default rules:
 *
 *   python:3.X[.Y][-slim][-bookworm|-trixie]  the named Debian release (trixie, the official
 *                                             image's default, when none is named) with CPython
 *                                             3.X[.Y] built from source into /usr/local as the
 *                                             official image does (cpythonSource.ts): the
 *                                             release's own OpenSSL, gcc and packages whatever
 *                                             Python it ships; pip upgradable, site-packages
 *                                             in /usr/local/lib/python3.X; without -slim,
 *                                             buildpack-deps' packages as well
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
import { ClassifiedError } from '../shared/failures.js';
import { cpythonRelease, type CpythonRelease } from './cpythonSource.js';
import { ubuntuToolchainHook } from './ubuntuToolchain.js';

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
  /** The deb822 file the base's apt sources are in (aptSources.ts); debian.sources unless said. */
  aptSourcesFile?: 'ubuntu.sources';
  /** CPython built from source into /usr/local (python:* bases), as the official image has it. */
  cpython?: CpythonRelease;
  /**
   * Where the original image's packages come from when that is not a registry this machine reaches
   * (Ubuntu's archive): a Dockerfile that pins one of its package versions cannot be built here.
   */
  originalArchive?: string;
}

const PATH_WITH_LOCAL = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** What the official slim python image installs besides Python itself. */
const PYTHON_IMAGE_PACKAGES = ['ca-certificates', 'netbase', 'tzdata'];
/**
 * The non-slim python image is built on buildpack-deps (its curl, scm and full layers): compilers, VCS
 * clients and the common -dev libraries a `pip install` of a C extension needs. Names that exist in
 * both bookworm and trixie (libncurses-dev for the dropped 5/w5 names, libxslt1-dev).
 */
const BUILDPACK_DEPS_PACKAGES = [
  'curl', 'gnupg', 'wget', 'git', 'mercurial', 'openssh-client', 'subversion', 'procps',
  'autoconf', 'automake', 'bzip2', 'default-libmysqlclient-dev', 'dpkg-dev', 'file', 'g++', 'gcc', 'imagemagick',
  'libbz2-dev', 'libc6-dev', 'libcurl4-openssl-dev', 'libdb-dev', 'libevent-dev', 'libffi-dev', 'libgdbm-dev',
  'libglib2.0-dev', 'libgmp-dev', 'libjpeg-dev', 'libkrb5-dev', 'liblzma-dev', 'libmagickcore-dev', 'libmagickwand-dev',
  'libmaxminddb-dev', 'libncurses-dev', 'libpng-dev', 'libpq-dev', 'libreadline-dev', 'libsqlite3-dev', 'libssl-dev',
  'libtool', 'libwebp-dev', 'libxml2-dev', 'libxslt1-dev', 'libyaml-dev', 'make', 'patch', 'unzip', 'xz-utils', 'zlib1g-dev',
];

/**
 * A rule of ROLLOUT_BASE_MAP: either a Debian release and packages for the images it matches, or
 * `as`, another image name the built-in rules make (`$1` takes a group of `match`): a mutable tag
 * pinned as it was when a task set was made (`python:3.13-slim-bookworm` as `python:3.13.13-slim-bookworm`).
 */
const UserRuleSchema = z.array(
  z.union([
    z
      .object({
        match: z.string().min(1),
        as: z.string().min(1),
        note: z.string().optional(),
      })
      .strict(),
    z
      .object({
        match: z.string().min(1),
        suite: z.enum(['bookworm', 'trixie']),
        packages: z.array(z.string().regex(/^[a-z0-9][a-z0-9+.-]*$/)).default([]),
        env: z.array(z.string().includes('=')).default([]),
        note: z.string().optional(),
      })
      .strict(),
  ]),
);

function builtIn(image: string, from: string): BaseRecipe | undefined {
  const python = /^python:(3\.\d+(?:\.\d+)?)(-slim)?(?:-(bookworm|trixie|bullseye))?$/.exec(image);
  if (python) {
    const release = cpythonRelease(python[1] as string, from);
    const slim = python[2] !== undefined;
    const named = python[3];
    // No release named: the official image's default, trixie. Bullseye is not on the mirror: bookworm, said so.
    const suite: DebianSuite = named === 'bookworm' || named === 'bullseye' ? 'bookworm' : 'trixie';
    const instead = named === 'bullseye' ? ' (in place of bullseye, which this mirror no longer serves)' : '';
    return {
      suite,
      packages: slim ? PYTHON_IMAGE_PACKAGES : [...PYTHON_IMAGE_PACKAGES, ...BUILDPACK_DEPS_PACKAGES],
      customize: [],
      env: [PATH_WITH_LOCAL, 'LANG=C.UTF-8', `PYTHON_VERSION=${release.version}`],
      substitute: `Debian ${suite} minbase${instead}${slim ? '' : " with buildpack-deps' packages (gcc, git, curl, -dev libraries)"} with CPython ${release.version} built from source into /usr/local as the official image does (no PGO/LTO)`,
      cpython: release,
    };
  }
  const debian = /^debian:(12|13|bookworm|trixie)(?:\.\d+)*(?:-slim)?$/.exec(image);
  if (debian) {
    const suite: DebianSuite = debian[1] === '12' || debian[1] === 'bookworm' ? 'bookworm' : 'trixie';
    return { suite, packages: [], customize: [], env: [PATH_WITH_LOCAL], substitute: `Debian ${suite} minbase` };
  }
  const ubuntu = /^ubuntu:(24\.04|noble|22\.04|jammy)$/.exec(image);
  if (ubuntu) {
    const noble = ubuntu[1] === '24.04' || ubuntu[1] === 'noble';
    const suite: DebianSuite = noble ? 'trixie' : 'bookworm';
    // Ubuntu 24.04's compilers are GCC 13, trixie's 14 (ubuntuToolchain.ts); jammy's 11 has no bookworm counterpart to switch to.
    const toolchain = noble ? { customize: [ubuntuToolchainHook(14, 13)], says: '; apt installs GCC 13 as gcc/g++/cpp/gfortran, as Ubuntu 24.04 does' } : { customize: [], says: '' };
    return {
      suite,
      packages: ['ca-certificates'],
      customize: toolchain.customize,
      env: [PATH_WITH_LOCAL],
      substitute: `Debian ${suite} minbase in place of Ubuntu ${ubuntu[1]} (no Ubuntu mirror here; package names mostly agree${toolchain.says})`,
      originalArchive: 'archive.ubuntu.com',
      aptSourcesFile: 'ubuntu.sources',
    };
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
    throw new ClassifiedError(
      'infra',
      'capability_missing',
      `ROLLOUT_BASE_MAP=${file}: cannot read it as JSON (${err instanceof Error ? err.message : String(err)}). Fix: point it at a JSON array of {match, suite, packages}`,
    );
  }
  const parsed = UserRuleSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ClassifiedError(
      'infra',
      'capability_missing',
      `ROLLOUT_BASE_MAP=${file}: [${issue?.path.join('.')}] ${issue?.message}. Fix: each rule is {"match": regex, "suite": "bookworm"|"trixie", "packages": [...], "env": ["K=V"], "note": "..."} or {"match": regex, "as": "python:3.13.13-slim-bookworm", "note": "..."}`,
    );
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
    const pattern = new RegExp(rule.match);
    if (!pattern.test(name)) continue;
    if ('as' in rule) {
      const instead = name.replace(pattern, rule.as);
      const recipe = builtIn(instead, line);
      if (!recipe)
        throw new ClassifiedError(
          'infra',
          'capability_missing',
          `ROLLOUT_BASE_MAP rule ${rule.match}: ${image} as ${instead}, which no built-in rule makes. Fix: name a python:3.X[.Y][-slim][-bookworm|-trixie], debian:12/13[-slim] or ubuntu:24.04 image in "as"`,
        );
      return { ...recipe, substitute: `as ${instead} (ROLLOUT_BASE_MAP rule ${rule.match}${rule.note ? `: ${rule.note}` : ''}): ${recipe.substitute}` };
    }
    return {
      suite: rule.suite,
      packages: rule.packages,
      customize: [],
      env: rule.env.length > 0 ? rule.env : [PATH_WITH_LOCAL],
      substitute: rule.note ?? `Debian ${rule.suite} minbase (ROLLOUT_BASE_MAP rule ${rule.match})`,
    };
  }
  const recipe = builtIn(name, line);
  if (recipe) return recipe;
  throw new ClassifiedError(
    'task',
    'invalid_spec',
    `${line}: the image ${image} cannot be pulled here and no base-map rule makes it from Debian. Fix: use python:3.X[.Y][-slim][-bookworm|-trixie] (3.9 to 3.14), debian:12/13[-slim] or ubuntu:24.04 as the base, or add a rule for it to the JSON file ROLLOUT_BASE_MAP names`,
  );
}
