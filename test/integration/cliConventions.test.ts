/**
 * Command-line conventions of every `rollout` subcommand, as a user meets them:
 * --help, -h and `rollout help CMD` print the subcommand's usage and exit 0;
 * a misspelt option is refused with exit 2 and the closest known option named.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

function rollout(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolvePromise) => {
    const child = spawn(process.execPath, [join(root, 'client/bin/rollout.js'), ...args], { cwd: root, env: { ...process.env, TEMPORAL_ADDRESS: '127.0.0.1:1' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => resolvePromise({ code, stdout, stderr }));
  });
}

// Each subcommand as typed, a misspelling of one of its options, and the option it should suggest.
const SUBCOMMANDS: { command: string[]; typo: string; meant: string }[] = [
  { command: ['run'], typo: '--grop-size', meant: '--group-size' },
  { command: ['status'], typo: '--wach', meant: '--watch' },
  { command: ['report'], typo: '--htlm', meant: '--html' },
  { command: ['worker'], typo: '--metric', meant: '--metrics' },
  { command: ['task', 'check'], typo: '--jsno', meant: '--json' },
  { command: ['gc'], typo: '--dryrun', meant: '--dry-run' },
  { command: ['cancel'], typo: '--reson', meant: '--reason' },
  { command: ['replay'], typo: '--trajectory', meant: '--trajectories' },
  { command: ['rerun'], typo: '--batch-di', meant: '--batch-id' },
  { command: ['branch'], typo: '--at-trun', meant: '--at-turn' },
  { command: ['replay-history'], typo: '--runid', meant: '--run-id' },
  { command: ['server'], typo: '--ui-prot', meant: '--ui-port' },
  { command: ['show'], typo: '--lnes', meant: '--lines' },
  { command: ['env', 'build'], typo: '--jsn', meant: '--json' },
  { command: ['export'], typo: '--keep-brokn', meant: '--keep-broken' },
  { command: ['policy-version'], typo: '--grop', meant: '--group' },
  { command: ['cluster', 'up'], typo: '--shard', meant: '--shards' },
];

describe('every subcommand answers --help, -h and rollout help CMD with its usage', { timeout: 300_000 }, () => {
  for (const { command } of SUBCOMMANDS) {
    test(`rollout ${command.join(' ')}`, async () => {
      const name = command.join(' ');
      const runs = await Promise.all([rollout([...command, '--help']), rollout([...command, '-h']), rollout(['help', command[0]!])]);
      for (const [i, run] of runs.entries()) {
        assert.equal(run.code, 0, `${['--help', '-h', 'help'][i]}: ${run.stderr}`);
        assert.match(run.stdout, new RegExp(`^usage: rollout ${name}`), run.stdout);
        assert.equal(run.stderr, '', 'help is not an error');
      }
      assert.equal(runs[0].stdout, runs[1].stdout, '-h prints what --help prints');
    });
  }

  test('rollout help and rollout --help list every subcommand', async () => {
    for (const args of [['help'], ['--help']]) {
      const run = await rollout(args);
      assert.equal(run.code, 0, run.stderr);
      for (const { command } of SUBCOMMANDS) assert.match(run.stdout, new RegExp(`^  rollout ${command.join(' ')}`, 'm'));
      // A subcommand added without a line in SUBCOMMANDS would go untested: every listed one is covered.
      const listed = [...run.stdout.matchAll(/^ {2}rollout ([a-z-]+)/gm)].map((m) => m[1]!);
      assert.deepEqual([...new Set(listed)].sort(), [...new Set(SUBCOMMANDS.map((s) => s.command[0]!))].sort(), 'every subcommand in the usage has a case in SUBCOMMANDS');
    }
  });

  test('--help after -- is an argument, not a request for help', async () => {
    const run = await rollout(['status', '--', '--help', 'b2']);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /^rollout: name one batch id/);
  });
});

describe('a misspelt option is refused with exit 2 and names the closest known one', { timeout: 300_000 }, () => {
  for (const { command, typo, meant } of SUBCOMMANDS) {
    test(`rollout ${command.join(' ')} ${typo}`, async () => {
      const run = await rollout([...command, typo]);
      assert.equal(run.code, 2, run.stdout + run.stderr);
      assert.equal(run.stderr, `rollout: unknown option ${typo}; did you mean ${meant}? (rollout ${command.join(' ')} --help lists its options)\n`);
    });
  }

  test('an option like none of the known ones gets no guess', async () => {
    const run = await rollout(['gc', '--xyzzy']);
    assert.equal(run.code, 2);
    assert.equal(run.stderr, 'rollout: unknown option --xyzzy (rollout gc --help lists its options)\n');
  });

  test('a misspelt subcommand names the closest one', async () => {
    const run = await rollout(['stauts', 'b1']);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /^rollout: unknown command "stauts"; did you mean status\?/);
    const help = await rollout(['help', 'rnu']);
    assert.equal(help.code, 2);
    assert.match(help.stderr, /did you mean run\?/);
  });
});
