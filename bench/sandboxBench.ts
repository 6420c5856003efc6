/**
 * `npm run bench:sandbox [-- --json] [-- --cycles N] [-- --alive N] [-- --image TASK_DIR] [-- --network none|public]`
 *
 * Section 1 of `npm run bench` on its own: local sandbox lifecycle latency
 * against fork/exec and bare bubblewrap floors measured in the same run
 * (bench/sandboxLifecycle.ts). `--image`: on that Dockerfile task's image
 * (built first when not cached); `--network public`: each with its own
 * user-mode network.
 */
import { parseArgs } from 'node:util';
import { ensureTaskImage } from '../images/taskImage.js';
import { loadTask } from '../tasks/loadTask.js';
import { sandboxSpecForTask } from '../images/sandboxSpecForTask.js';
import type { SandboxSpec } from '../shared/sandbox.js';
import { formatSandboxLifecycle, runSandboxLifecycle } from './sandboxLifecycle.js';
import { machineFacts } from './stats.js';

const { values } = parseArgs({
  options: {
    json: { type: 'boolean', default: false },
    cycles: { type: 'string', default: '200' },
    alive: { type: 'string', default: '200' },
    image: { type: 'string' },
    network: { type: 'string', default: 'none' },
  },
});
const log = values.json ? (): void => undefined : (line: string): void => console.log(line);
if (values.network !== 'none' && values.network !== 'public') throw new Error(`--network ${values.network}: use none or public`);
let spec: Partial<SandboxSpec> = { network: values.network };
if (values.image) {
  const task = loadTask(values.image);
  const { image } = await ensureTaskImage(task, { log });
  // The image's root, env and mounts; the limits stay the bench's own (none), as for the host base.
  const s = sandboxSpecForTask(task, { workflowId: 'bench', runId: 'bench', attempt: 0 }, {}, false, image);
  spec = { environmentDir: s.environmentDir, rootfs: s.rootfs, env: s.env, fileCapabilities: s.fileCapabilities, readOnlyMounts: s.readOnlyMounts, workdir: s.workdir, network: values.network };
  log(`on the image of ${task.id}: ${image.tag}`);
}
const machine = await machineFacts();
const result = await runSandboxLifecycle({ cycles: Number(values.cycles), alive: Number(values.alive), log, spec });

if (values.json) {
  console.log(JSON.stringify({ machine, ...result }, null, 2));
} else {
  log('');
  log(formatSandboxLifecycle(result));
  log(`machine: ${JSON.stringify(machine)}`);
}
