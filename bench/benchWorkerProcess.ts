/** The bench's worker processes (bench/benchWorker.ts): started with the options under test, asked for reports over IPC. */
import { fork, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { WORKER_ROLES, type WorkerRole } from '../workers/pipelineWorkers.js';
import type { BenchWorkerConfig, BenchWorkerReport, WorkerSetup } from './benchWorker.js';

const WORKER_ENTRY = fileURLToPath(new URL('./benchWorker.ts', import.meta.url));

/** Asks a worker process for a report of `type` and waits for it. */
export function request(child: ChildProcess, type: string): Promise<BenchWorkerReport> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: BenchWorkerReport): void => {
      if (m.type !== type) return;
      child.off('message', onMessage);
      resolve(m);
    };
    child.on('message', onMessage);
    child.once('exit', (code) => reject(new Error(`bench worker exited (${code}) before answering ${type}`)));
    child.send({ type });
  });
}

/** Starts a worker process with `config`; resolves once it says it is ready. */
export function startWorker(config: BenchWorkerConfig, logFile: string): Promise<ChildProcess> {
  const log = openSync(logFile, 'a');
  const child = fork(WORKER_ENTRY, [JSON.stringify(config)], {
    // BENCH_WORKER_CPU_PROF=<dir> writes a V8 CPU profile of each worker process there (to see what its CPU went to).
    execArgv: ['--import', 'tsx', ...(process.env.BENCH_WORKER_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_WORKER_CPU_PROF}`] : [])],
    stdio: ['ignore', log, log, 'ipc'],
    env: { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn' },
  });
  closeSync(log);
  return new Promise((resolve, reject) => {
    child.once('message', () => resolve(child));
    child.once('exit', (code) => reject(new Error(`bench worker exited (${code}) while starting; see ${logFile}`)));
  });
}

/** Which roles a process of a setup runs, for tables: "main | host+policy". */
export function processLayout(setup: WorkerSetup): string {
  return (setup.processes ?? [[...WORKER_ROLES]]).map((roles: WorkerRole[]) => roles.join('+')).join(' | ');
}
