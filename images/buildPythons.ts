/**
 * The Python a Dockerfile's build steps ask uv for. A stage that runs `uv run script.py`, `uv venv`,
 * `uvx`, `uv pip`, `uv sync` or `uv python install` on a base without that Python makes Docker's uv
 * download a managed CPython from github.com, which is out of reach here. Each such stage gets the
 * Python its requests need (pythonRequests.ts: -p/--python, UV_PYTHON, a script's inline
 * `requires-python`; none stated means any): the base's own when it has one that meets them,
 * else the Debian release's python3 from its mirror when that does, else a CPython built here
 * from source into uv's managed-installation directory.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { ParsedDockerfile } from './dockerfile.js';
import { commandLineRequests, resolvePythonRequest, type PythonRequest } from './pythonRequests.js';

/** A RUN step that needs an interpreter from uv. */
const UV_NEEDS_PYTHON = /(^|[\s;&|(/])(uv\s+(run|venv|sync|pip|tool\s+run|python\s+install)\b|uvx\b)/;

/** The RUN steps of each image stage (by its index in `parsed.froms`): from its FROM to the next FROM. */
function stageRuns(parsed: ParsedDockerfile): string[][] {
  return parsed.froms.map((from) => {
    const runs: string[] = [];
    for (let i = from.index + 1; i < parsed.instructions.length; i++) {
      const instruction = (parsed.instructions[i] as string).trim();
      if (/^FROM\s/i.test(instruction)) break;
      if (/^RUN\s/i.test(instruction)) runs.push(instruction.replace(/^RUN\s+/i, ''));
    }
    return runs;
  });
}

/** A script of the build context `uv run` names, found by file name (it reaches the image by COPY). */
function contextScript(contextDir: string, named: string): string | undefined {
  const name = basename(named);
  let seen = 0;
  const walk = (dir: string): string | undefined => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (++seen > 5000) return undefined;
      const path = join(dir, entry.name);
      if (entry.isDirectory() && !['.git', 'node_modules'].includes(entry.name)) {
        const found = walk(path);
        if (found) return found;
      } else if (entry.isFile() && entry.name === name && statSync(path).size < 1024 * 1024) return path;
    }
    return undefined;
  };
  return existsSync(contextDir) ? walk(contextDir) : undefined;
}

/** What a stage's uv steps ask for: requests, or 'any' when a uv step needs a Python and states none; undefined when none does. */
export function stagePythonRequests(parsed: ParsedDockerfile, contextDir: string): (PythonRequest[] | 'any' | undefined)[] {
  return stageRuns(parsed).map((runs, i) => {
    const uvRuns = runs.filter((r) => UV_NEEDS_PYTHON.test(r));
    if (uvRuns.length === 0) return undefined;
    const where = parsed.froms[i]?.where ?? 'environment/Dockerfile';
    const requests: PythonRequest[] = [];
    for (const run of uvRuns) {
      requests.push(...commandLineRequests(run, `${where} stage`));
      for (const m of run.matchAll(/\buv\s+run\b[^;&|]*?\s(\S+\.py)\b/g)) {
        const script = contextScript(contextDir, m[1] as string);
        const block = script ? /^# \/\/\/ script\s*$([\s\S]*?)^# \/\/\/\s*$/m.exec(readFileSync(script, 'utf8')) : null;
        const required = block?.[1] ? /requires-python\s*=\s*["']([^"']+)["']/.exec(block[1])?.[1] : undefined;
        if (required) requests.push({ request: required, where: `environment/${basename(script as string)} (inline requires-python)` });
      }
    }
    return requests.length > 0 ? requests : 'any';
  });
}

/** What a stage gets so that its uv steps find their Python. */
export type StagePython = { kind: 'base' } | { kind: 'debian'; minor: string } | { kind: 'build'; minor: string; patch?: string } | { kind: 'none'; why: string };

/**
 * `basePython`: the minor a python:* base was built with (undefined for a Debian or Ubuntu base);
 * `releasePython`: the Debian release's python3; `buildable`: the minors made here.
 */
export function stagePython(requests: PythonRequest[] | 'any', basePython: string | undefined, releasePython: string, buildable: string[]): StagePython {
  const list = requests === 'any' ? [] : requests;
  const meets = (minor: string): boolean => list.every((r) => 'satisfiedByImage' in (resolvePythonRequest(r.request, minor, []) ?? {}));
  if (basePython && meets(basePython)) return { kind: 'base' };
  if (meets(releasePython)) return { kind: 'debian', minor: releasePython };
  const first = list[0] as PythonRequest;
  const resolved = resolvePythonRequest(first.request, undefined, buildable);
  if (!resolved || 'satisfiedByImage' in resolved) return { kind: 'none', why: `${first.where} asks uv for Python ${first.request}, and this builder makes none that meets it (${buildable.join(', ')})` };
  if (!list.every((r) => 'satisfiedByImage' in (resolvePythonRequest(r.request, resolved.build, []) ?? {}))) return { kind: 'none', why: `the build's uv steps ask for Pythons no single one meets: ${list.map((r) => `${r.request} (${r.where})`).join(', ')}` };
  return { kind: 'build', minor: resolved.build, ...(resolved.patch ? { patch: resolved.patch } : {}) };
}

/** The Debian python3 step: only when the stage has no python3 of its own yet (its Dockerfile may install one later). */
export function debianPythonSteps(): string[] {
  return [
    'RUN command -v python3 >/dev/null 2>&1 || { had_lists=$(find /var/lib/apt/lists -maxdepth 1 -type f ! -name lock 2>/dev/null | wc -l); apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 && if [ "$had_lists" = 0 ]; then rm -rf /var/lib/apt/lists/*; fi; }',
  ];
}
