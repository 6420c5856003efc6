/**
 * `npm run bench:sandbox [-- --json] [-- --cycles N] [-- --alive N]`
 *
 * Section 1 of `npm run bench` on its own: local sandbox lifecycle latency
 * against fork/exec and bare bubblewrap floors measured in the same run
 * (bench/sandboxLifecycle.ts).
 */
import { parseArgs } from 'node:util';
import { formatSandboxLifecycle, runSandboxLifecycle } from './sandboxLifecycle.js';
import { machineFacts } from './stats.js';

const { values } = parseArgs({
  options: { json: { type: 'boolean', default: false }, cycles: { type: 'string', default: '200' }, alive: { type: 'string', default: '200' } },
});
const log = values.json ? (): void => undefined : (line: string): void => console.log(line);
const machine = await machineFacts();
const result = await runSandboxLifecycle({ cycles: Number(values.cycles), alive: Number(values.alive), log });

if (values.json) {
  console.log(JSON.stringify({ machine, ...result }, null, 2));
} else {
  log('');
  log(formatSandboxLifecycle(result));
  log(`machine: ${JSON.stringify(machine)}`);
}
