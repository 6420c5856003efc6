/**
 * The harness's own process: its venv's python running its adapter module (python/harness_bridge/)
 * in its jail (harnessJail.ts) with the scratch directory as its home, with an environment of
 * exactly what it needs (the bridge's address, no downloads at import, no user config), in a
 * process group of its own so that stopping it stops whatever it started. Its stdout and stderr
 * are kept as one tail: the evidence when it fails.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { HARNESS_BRIDGE_DIR, type InstalledHarness } from './harnessInstall.js';
import { jailedHarnessArgv } from './harnessJail.js';

const OUTPUT_TAIL_BYTES = 4096;

export interface HarnessExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface HarnessProcess {
  exited: Promise<HarnessExitStatus>;
  /** The last few KB of what it printed (stdout and stderr interleaved). */
  outputTail: () => string;
  /** Signals its whole process group; nothing when it is gone. */
  signalGroup: (signal: NodeJS.Signals) => void;
}

export function startHarnessProcess(harness: InstalledHarness, runDir: string, runFile: string, bridge: string): HarnessProcess {
  const [file, args] = jailedHarnessArgv(harness, runDir, [runFile]);
  const child = spawn(file, args, {
    cwd: runDir,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: runDir,
      USER: 'rollout-harness',
      LOGNAME: 'rollout-harness',
      PYTHONPATH: HARNESS_BRIDGE_DIR,
      PYTHONDONTWRITEBYTECODE: '1',
      PYTHONUNBUFFERED: '1',
      // litellm would download its cost map at import; mini-swe-agent would read ~/.config and print a banner.
      LITELLM_LOCAL_MODEL_COST_MAP: 'True',
      MSWEA_GLOBAL_CONFIG_DIR: join(runDir, 'config'),
      MSWEA_SILENT_STARTUP: '1',
      // The capture endpoint retries the inference server itself; the harness's own retries only add waiting.
      MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT: '2',
      ROLLOUT_SANDBOX_BRIDGE: bridge,
      NO_PROXY: '127.0.0.1,localhost',
      no_proxy: '127.0.0.1,localhost',
    },
  });
  let tail = '';
  const keep = (chunk: Buffer): void => {
    tail = (tail + chunk.toString('utf8')).slice(-OUTPUT_TAIL_BYTES);
  };
  child.stderr.on('data', keep);
  child.stdout.on('data', keep);
  const exited = new Promise<HarnessExitStatus>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  return {
    exited,
    outputTail: () => tail,
    signalGroup: (signal) => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, signal);
      } catch {
        // already gone
      }
    },
  };
}
