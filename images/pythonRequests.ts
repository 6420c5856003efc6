/**
 * Which Pythons a task's tests ask uv for, in every way uv takes a request (its own sources, not one
 * command's spelling): `-p`/`--python` (or `--python=X`, `-pX`) on any uv or uvx command, the
 * versions of `uv python install|pin|find`, `UV_PYTHON=` in the script, a `.python-version` file,
 * `requires-python` in a pyproject.toml and in a script's inline metadata (`# /// script`). A request
 * is a version (`3.12`, `3.12.4`, `cpython@3.12`, `python3.12`, `cpython-3.12`) or a range
 * (`>=3.11,<3.13`); which Python satisfies it is decided against what the image has and what this
 * builder makes (resolvePythonRequest).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/** A request and where it was read, for a message that names it. */
export interface PythonRequest {
  request: string;
  where: string;
}

/** Files of tests/ read for requests (a task's tests are small; a huge data file is not a config). */
const MAX_FILE_BYTES = 1024 * 1024;
const MAX_FILES = 2000;

/** The requests stated on uv command lines and in UV_PYTHON of a shell script (continuations joined). */
export function commandLineRequests(script: string, where: string): PythonRequest[] {
  const out: PythonRequest[] = [];
  const text = script.replace(/\\\n/g, ' ');
  for (const raw of text.split('\n')) {
    const line = raw.replace(/(^|\s)#.*$/, '');
    for (const m of line.matchAll(/(?:^|[\s;&|(])(?:export\s+)?UV_PYTHON=("[^"]*"|'[^']*'|\S+)/g)) out.push({ request: unquote(m[1] as string), where: `${where} (UV_PYTHON)` });
    for (const command of line.split(/&&|\|\||;|\|/)) {
      const words = command.trim().split(/\s+/).filter(Boolean).map(unquote);
      const start = words.findIndex((w) => /(^|\/)(uv|uvx)$/.test(w));
      if (start < 0) continue;
      const args = words.slice(start + 1);
      args.forEach((w, i) => {
        const next = args[i + 1];
        if ((w === '-p' || w === '--python') && next) out.push({ request: next, where: `${where} (${w} ${next})` });
        const joined = /^(?:--python=|-p)(.+)$/.exec(w);
        if (joined?.[1] && w !== '-p') out.push({ request: joined[1], where: `${where} (${w})` });
      });
      if (words[start]?.endsWith('uv') && args[0] === 'python' && ['install', 'pin', 'find'].includes(args[1] ?? '')) {
        for (const v of args.slice(2)) if (!v.startsWith('-') && looksLikeRequest(v)) out.push({ request: v, where: `${where} (uv python ${args[1]} ${v})` });
      }
    }
  }
  return out.filter((r) => looksLikeRequest(r.request));
}

function unquote(word: string): string {
  return word.replace(/^(["'])(.*)\1$/, '$2');
}

function looksLikeRequest(v: string): boolean {
  return parseVersionRequest(v) !== undefined || /^[<>=!~]/.test(v);
}

/** `3.12`, `3.12.4`, `cpython@3.12`, `cpython3.12`, `python3.12`, `cpython-3.12.4-linux-x86_64-gnu` -> the version; undefined for anything else. */
export function parseVersionRequest(v: string): { minor: string; patch?: string } | undefined {
  const m = /^(?:c?python)?[@-]?(3\.\d+)(?:\.(\d+))?(?:-[a-z0-9_-]+)?$/.exec(v.trim());
  if (!m) return undefined;
  return { minor: m[1] as string, ...(m[2] !== undefined ? { patch: `${m[1]}.${m[2]}` } : {}) };
}

/** The `requires-python` of a pyproject.toml or of a script's `# /// script` block, if any. */
function requiresPython(text: string, inline: boolean): string | undefined {
  let body = text;
  if (inline) {
    const block = /^# \/\/\/ script\s*$([\s\S]*?)^# \/\/\/\s*$/m.exec(text);
    if (!block?.[1]) return undefined;
    body = block[1].replace(/^# ?/gm, '');
  }
  return /^\s*requires-python\s*=\s*["']([^"']+)["']/m.exec(body)?.[1];
}

/** Every request the tests make: test.sh's command lines, and tests/'s .python-version, pyproject.toml and inline script metadata. */
export function pythonRequestsOf(testsDir: string): PythonRequest[] {
  const out: PythonRequest[] = [];
  const testScript = join(testsDir, 'test.sh');
  if (existsSync(testScript)) out.push(...commandLineRequests(readFileSync(testScript, 'utf8'), 'tests/test.sh'));
  let seen = 0;
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      if (++seen > MAX_FILES) return;
      const path = join(dir, entry.name);
      const where = `tests/${relative(testsDir, path)}`;
      if (entry.isDirectory()) {
        if (!['node_modules', '.git', '.venv', '__pycache__'].includes(entry.name)) walk(path);
        continue;
      }
      if (!entry.isFile() || statSync(path).size > MAX_FILE_BYTES) continue;
      if (entry.name === '.python-version') {
        // uv takes the first line that is not a comment as the request.
        const first = readFileSync(path, 'utf8').split('\n').map((l) => l.trim()).find((l) => l !== '' && !l.startsWith('#'));
        if (first) out.push({ request: first, where });
      } else if (entry.name === 'pyproject.toml') {
        const r = requiresPython(readFileSync(path, 'utf8'), false);
        if (r) out.push({ request: r, where: `${where} (requires-python)` });
      } else if (entry.name.endsWith('.py')) {
        const r = requiresPython(readFileSync(path, 'utf8'), true);
        if (r) out.push({ request: r, where: `${where} (inline requires-python)` });
      } else if (entry.name.endsWith('.sh') && path !== testScript) {
        out.push(...commandLineRequests(readFileSync(path, 'utf8'), where));
      }
    }
  };
  if (existsSync(testsDir)) walk(testsDir);
  return out;
}

/**
 * Whether minor `3.X` (at its newest patch, which is what gets built) satisfies a PEP 440 specifier set
 * (`>=3.11,<3.13`, `==3.12.*`, `~=3.11`, `>3.12` which 3.12.1 meets).
 */
export function minorSatisfies(minor: string, specifiers: string): boolean {
  const have = minorNumber(minor);
  return specifiers.split(',').map((s) => s.trim()).filter(Boolean).every((spec) => {
    const m = /^(===|==|!=|<=|>=|<|>|~=)\s*3(?:\.(\d+|\*))?(?:\.(\d+|\*))?/.exec(spec);
    if (!m) return false;
    const op = m[1] as string;
    // `>=3`, `==3.*`: every 3.X.
    if (m[2] === undefined || m[2] === '*') return !['!=', '<', '<='].includes(op);
    const want = Number(m[2]);
    const patch = m[3] === undefined || m[3] === '*' ? undefined : Number(m[3]);
    switch (op) {
      case '==':
      case '===':
        return have === want;
      case '!=':
        return patch === undefined ? have !== want : true;
      case '~=':
        return patch === undefined ? have >= want : have === want;
      case '>=':
      case '>':
        return have >= want;
      case '<=':
        return have <= want;
      case '<':
        return patch !== undefined && patch > 0 ? have <= want : have < want;
      default:
        return false;
    }
  });
}

function minorNumber(minor: string): number {
  return Number(minor.split('.')[1]);
}

/**
 * What a request needs: nothing (the image's Python meets it), a minor to build (the newest of
 * `buildable` that meets it, as uv picks the newest), or undefined when none does.
 */
export function resolvePythonRequest(request: string, imagePython: string | undefined, buildable: string[]): { satisfiedByImage: true } | { build: string; patch?: string } | undefined {
  const version = parseVersionRequest(request);
  if (version) {
    // The image's minor meets it (a patch pin on the image's own minor is taken as met: its patch is the release's).
    if (version.minor === imagePython) return { satisfiedByImage: true };
    return buildable.includes(version.minor) || version.patch ? { build: version.minor, ...(version.patch ? { patch: version.patch } : {}) } : undefined;
  }
  if (imagePython && minorSatisfies(imagePython, request)) return { satisfiedByImage: true };
  const newest = [...buildable].sort((a, b) => minorNumber(b) - minorNumber(a)).find((m) => minorSatisfies(m, request));
  return newest ? { build: newest } : undefined;
}
