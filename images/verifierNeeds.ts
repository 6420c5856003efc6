/**
 * What a task's tests/test.sh fetches from the internet when it runs, read
 * from the script itself, so the builder can provide it beforehand and the
 * verifier runs offline with the script unmodified:
 *   apt-get install ... PKG       installed into the image (a last build step)
 *   uvx -w NAME==V / pip install NAME==V
 *                                 wheels downloaded into a wheel directory the
 *                                 verifier sees read-only
 *   curl ... astral.sh/uv/...     uv itself (from PyPI) on the verifier's PATH
 * The Pythons the tests ask uv for are read by pythonRequests.ts (every form uv takes).
 */
import { readFileSync } from 'node:fs';

export interface VerifierNeeds {
  aptPackages: string[];
  /** Pinned requirements (NAME==VERSION), sorted. */
  requirements: string[];
  usesUv: boolean;
}

const REQUIREMENT = /^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==[A-Za-z0-9.+!-]+$/;

export function readVerifierNeeds(testScript: string): VerifierNeeds {
  // Join continuation lines so `uvx \` + `-w pytest==8.4.1 \` read as one command.
  const text = readFileSync(testScript, 'utf8').replace(/\\\n/g, ' ');
  const lines = text.split('\n').map((l) => l.replace(/(^|\s)#.*$/, '').trim());
  const apt = new Set<string>();
  const requirements = new Set<string>();
  let usesUv = false;
  for (const line of lines) {
    for (const command of line.split(/&&|\|\||;|\|/)) {
      const words = command.trim().split(/\s+/).filter(Boolean);
      const verb = words.findIndex((w) => w === 'install');
      const tool = words[0] ?? '';
      if ((tool === 'apt-get' || tool === 'apt') && verb > 0) {
        for (const w of words.slice(verb + 1)) if (!w.startsWith('-') && /^[a-z0-9][a-z0-9+.-]*$/.test(w)) apt.add(w);
      }
      if (/(^|\/)pip3?$/.test(tool) || (tool.startsWith('python') && words[1] === '-m' && words[2] === 'pip')) {
        if (verb > 0) for (const w of words.slice(verb + 1)) if (REQUIREMENT.test(w)) requirements.add(w);
      }
      if (tool === 'uvx' || (tool === 'uv' && (words[1] === 'tool' || words[1] === 'run' || words[1] === 'pip'))) {
        usesUv = true;
        words.forEach((w, i) => {
          const next = words[i + 1];
          if ((w === '-w' || w === '--with') && next && REQUIREMENT.test(next)) requirements.add(next);
          if (w !== '-w' && w !== '--with' && REQUIREMENT.test(w) && words[i - 1] !== '-w') requirements.add(w);
        });
      }
      if (/astral\.sh\/uv/.test(command)) usesUv = true;
    }
  }
  return { aptPackages: [...apt].sort(), requirements: [...requirements].sort(), usesUv };
}
