/**
 * The house's layering (.dependency-cruiser.cjs, docs/architecture.md): no import circle, no import
 * up the layers. The real tree must pass; a small tree that breaks each rule must be refused by it,
 * so the check is known to bite.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const ROOMS = ['shared', 'sandboxes', 'tasks', 'stores', 'policies', 'verifier', 'images', 'agent', 'harnesses', 'resume', 'activities', 'workflows', 'servers', 'workers', 'cluster', 'client', 'bench'];

interface Violation {
  rule: { name: string };
  from: string;
  to: string;
}

/** Runs dependency-cruiser with the project's rules over `rooms` of `dir`; its violations. */
async function cruise(dir: string, rooms: string[]): Promise<Violation[]> {
  const bin = join(root, 'node_modules/.bin/depcruise');
  const run = await promisify(execFile)(bin, ['--config', join(dir, '.dependency-cruiser.cjs'), '--output-type', 'json', ...rooms], { cwd: dir, maxBuffer: 64 << 20 }).catch(
    (err: Error & { stdout?: string; stderr?: string }) => {
      // Exit status 1 is "violations found"; the JSON is on stdout either way.
      if (err.stdout) return { stdout: err.stdout };
      throw new Error(`depcruise failed: ${err.stderr || err.message}`);
    },
  );
  const report = JSON.parse(run.stdout) as { summary: { violations: Violation[] } };
  return report.summary.violations;
}

test('the tree has no import circle and no import up the layers', { timeout: 120_000 }, async () => {
  const violations = await cruise(root, ROOMS);
  assert.deepEqual(
    violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`),
    [],
    'fix the import (see .dependency-cruiser.cjs for what each room may import)',
  );
});

test('the rules refuse a circle, an upward import, an import of the room above, an upward import between engine rooms and a workflow importing the engine', { timeout: 120_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'layering-'));
  try {
    copyFileSync(join(root, '.dependency-cruiser.cjs'), join(dir, '.dependency-cruiser.cjs'));
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true } }));
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
    const files: Record<string, string> = {
      'shared/contract.ts': "import type { Engine } from '../activities/engine.js';\nexport type Contract = Engine;\n",
      'activities/engine.ts': "import { helper } from './helper.js';\nexport interface Engine { n: number }\nexport const engine = helper;\n",
      'activities/helper.ts': "import type { Engine } from './engine.js';\nexport const helper = (e: Engine): number => e.n;\n",
      'workflows/flow.ts': "import { cli } from '../client/cli.js';\nexport const flow = cli;\n",
      'client/cli.ts': "export const cli = 1;\n",
      // The engine's rooms: policies/ sits below agent/, and workflows/ reach the engine only through activities/.
      'policies/call.ts': "import type { TurnRecord } from '../agent/record.js';\nexport const turnOf = (r: TurnRecord): number => r.turn;\n",
      'agent/record.ts': "export interface TurnRecord { turn: number }\n",
      'sandboxes/provider.ts': "export interface Provider { name: string }\n",
      'workflows/attempt.ts': "import type { Provider } from '../sandboxes/provider.js';\nexport type AttemptProvider = Provider;\n",
    };
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(join(dir, dirname(path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    const violations = await cruise(dir, ['shared', 'sandboxes', 'policies', 'agent', 'activities', 'workflows', 'client']);
    // A circle is reported once, from whichever of its files the cruise met first.
    const named = violations.map((v) => (v.rule.name === 'no-circular' ? `no-circular: ${[v.from, v.to].sort().join(' <-> ')}` : `${v.rule.name}: ${v.from} -> ${v.to}`)).sort();
    assert.deepEqual(named, [
      'layers-policies: policies/call.ts -> agent/record.ts',
      'layers-shared: shared/contract.ts -> activities/engine.ts',
      'layers-workflows: workflows/attempt.ts -> sandboxes/provider.ts',
      'layers-workflows: workflows/flow.ts -> client/cli.ts',
      'no-circular: activities/engine.ts <-> activities/helper.ts',
    ]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
