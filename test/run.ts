/**
 * `npm test`: starts a real Temporal dev server (unless TEMPORAL_ADDRESS names
 * one to reuse), runs every test file with Node's test runner against it, and
 * stops the server. Extra arguments are passed to `node --test` (for example a
 * file list or `--test-name-pattern`).
 */
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDevServer, type RunningDevServer } from '../workers/temporalDevServer.js';
import { TemporalBinaryError } from '../workers/temporalBinary.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const outputDir = join(root, 'test-output');
mkdirSync(outputDir, { recursive: true });

let server: RunningDevServer | undefined;
const env = { ...process.env };
if (!env.TEMPORAL_ADDRESS) {
  try {
    server = await startDevServer({ logFile: join(outputDir, 'temporal-dev-server.log') });
  } catch (err) {
    if (err instanceof TemporalBinaryError) {
      console.error(`npm test: ${err.message}`);
      process.exit(2);
    }
    throw err;
  }
  env.TEMPORAL_ADDRESS = server.address;
  env.TEMPORAL_CLI_PATH = server.binary.path;
  if (server.uiUrl) env.TEMPORAL_UI_URL = server.uiUrl;
  console.log(`npm test: Temporal dev server ${server.binary.version} at ${server.address} (UI ${server.uiUrl ?? 'off'}), pid ${server.pid}`);
} else {
  console.log(`npm test: reusing the Temporal server at ${env.TEMPORAL_ADDRESS}`);
}

const userArgs = process.argv.slice(2);
const files = userArgs.some((a) => !a.startsWith('-')) ? [] : ['test/**/*.test.ts'];
const child = spawn(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-reporter=spec', '--test-reporter-destination=stdout', ...userArgs, ...files],
  { cwd: root, env, stdio: 'inherit' },
);

let stopping = false;
async function shutdown(code: number): Promise<never> {
  if (!stopping) {
    stopping = true;
    await server?.stop();
  }
  process.exit(code);
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    child.kill(signal);
  });
}
child.on('exit', (code, signal) => {
  void shutdown(code ?? (signal ? 1 : 0));
});
