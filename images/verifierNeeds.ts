/**
 * What a task's tests/test.sh fetches from the internet when it runs, read
 * from the script itself, so the builder can provide it beforehand and the
 * verifier runs offline with the script unmodified:
 *   apt-get install ... PKG       installed into the image (a last build step)
 *   uvx -w NAME==V / pip install NAME==V / -r tests/requirements.txt
 *                                 wheels downloaded into a wheel directory the
 *                                 verifier sees read-only (pins only: an
 *                                 unpinned name has no version to provide)
 * whoever runs the tool: `sudo`, `env`, `DEBIAN_FRONTEND=noninteractive apt-get`, /root/.local/bin/uvx.
 *   curl ... astral.sh/uv/...     uv itself (from PyPI) on the verifier's PATH
 * The Pythons the tests ask uv for are read by pythonRequests.ts (every form uv takes).
 */
import { existsSync, readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

export interface VerifierNeeds {
  aptPackages: string[];
  /** Pinned requirements (NAME==VERSION), sorted. */
  requirements: string[];
  usesUv: boolean;
}

const REQUIREMENT = /^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==[A-Za-z0-9.+!-]+$/;

/** Words that run the command after them (`sudo apt-get`, `env X=1 pip`): the tool is the word after. */
const RUNNERS = new Set(['sudo', 'env', 'time', 'command', 'exec', 'nohup', 'nice']);

/** The command's words, unquoted, from its tool on: leading assignments (`DEBIAN_FRONTEND=noninteractive`) and runners dropped, the tool by its file name. */
function toolWords(command: string): string[] {
  const words = command.trim().split(/\s+/).filter(Boolean).map((w) => w.replace(/^(["'])(.*)\1$/, '$2'));
  let start = 0;
  while (start < words.length && (/^[A-Za-z_][A-Za-z0-9_]*=/.test(words[start] as string) || RUNNERS.has(words[start] as string) || (words[start - 1] === 'sudo' && (words[start] as string).startsWith('-')))) start++;
  const out = words.slice(start);
  if (out[0]) out[0] = out[0].slice(out[0].lastIndexOf('/') + 1);
  return out;
}

/** Pinned requirements of a requirements file the tests name (`-r /tests/requirements.txt`), read from tests/; comments and options skipped. */
function requirementsFile(testsDir: string, named: string): string[] {
  const candidates = [named.startsWith('/tests/') ? join(testsDir, named.slice('/tests/'.length)) : join(testsDir, named), join(testsDir, basename(named))];
  const file = candidates.find((c) => existsSync(c));
  if (!file) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .map((l) => l.replace(/(^|\s)#.*$/, '').trim())
    .filter((l) => REQUIREMENT.test(l));
}

/** Options whose next word is a requirements file. */
const REQUIREMENTS_FILE_FLAGS = new Set(['-r', '--requirement', '--requirements', '--with-requirements']);

export function readVerifierNeeds(testScript: string): VerifierNeeds {
  const testsDir = dirname(testScript);
  // Join continuation lines so `uvx \` + `-w pytest==8.4.1 \` read as one command.
  const text = readFileSync(testScript, 'utf8').replace(/\\\n/g, ' ');
  const lines = text.split('\n').map((l) => l.replace(/(^|\s)#.*$/, '').trim());
  const apt = new Set<string>();
  const requirements = new Set<string>();
  let usesUv = false;
  const fromFiles = (words: string[]): void => {
    words.forEach((w, i) => {
      const next = words[i + 1];
      if (REQUIREMENTS_FILE_FLAGS.has(w) && next) for (const r of requirementsFile(testsDir, next)) requirements.add(r);
      const joined = /^--(?:requirement|requirements|with-requirements)=(.+)$/.exec(w);
      if (joined?.[1]) for (const r of requirementsFile(testsDir, joined[1])) requirements.add(r);
    });
  };
  for (const line of lines) {
    for (const command of line.split(/&&|\|\||;|\|/)) {
      const words = toolWords(command);
      const verb = words.findIndex((w) => w === 'install');
      const tool = words[0] ?? '';
      if ((tool === 'apt-get' || tool === 'apt') && verb > 0) {
        for (const w of words.slice(verb + 1)) if (!w.startsWith('-') && /^[a-z0-9][a-z0-9+.-]*$/.test(w)) apt.add(w);
      }
      if (/^pip(3(\.\d+)?)?$/.test(tool) || (tool.startsWith('python') && words[1] === '-m' && words[2] === 'pip')) {
        if (verb > 0) {
          for (const w of words.slice(verb + 1)) if (REQUIREMENT.test(w)) requirements.add(w);
          fromFiles(words);
        }
      }
      if (tool === 'uvx' || (tool === 'uv' && (words[1] === 'tool' || words[1] === 'run' || words[1] === 'pip'))) {
        usesUv = true;
        words.forEach((w, i) => {
          const next = words[i + 1];
          if ((w === '-w' || w === '--with' || w === '--from') && next && REQUIREMENT.test(next)) requirements.add(next);
          const joined = /^--(?:with|from)=(.+)$/.exec(w);
          if (joined?.[1]) for (const r of joined[1].split(',')) if (REQUIREMENT.test(r)) requirements.add(r);
          if (w !== '-w' && w !== '--with' && REQUIREMENT.test(w) && words[i - 1] !== '-w') requirements.add(w);
        });
        fromFiles(words);
      }
      if (/astral\.sh\/uv/.test(command)) usesUv = true;
    }
  }
  return { aptPackages: [...apt].sort(), requirements: [...requirements].sort(), usesUv };
}
