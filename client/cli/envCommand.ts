/**
 * `rollout env build <task-dir>...`: builds each Dockerfile task's image here
 * (bases from Debian, podman without a daemon), or finds it in the cache;
 * prints the image, what was substituted and the build time.
 * `rollout env gc [--unused-for HOURS] [--dry-run]`: removes cached images
 * unused that long (default 168 h; 0 = every image not under a live sandbox).
 * `rollout env du`: disk use of the image cache.
 */
import { diskUse, gcImages, type DiskUse } from '../../images/imageGc.js';
import { imageTools } from '../../images/imageTools.js';
import { ensureTaskImage, imageIdentity } from '../../images/taskImage.js';
import { loadTask } from '../../tasks/loadTask.js';
import { ClassifiedError } from '../../shared/failures.js';
import { HelpRequested, parseCommandLine, wantsHelp } from './commandLine.js';
import { UsageError } from './usageError.js';

export const envUsage = `rollout env build <task-dir>... [--json]
  Builds each task's environment/Dockerfile into an image on this host (FROM images made
  from Debian through the base map), or reports the cached one.
rollout env gc [--unused-for HOURS] [--dry-run]
  Removes task images unused for HOURS (default 168) and not under a live sandbox,
  bases no remaining image uses, and dangling layers; prints disk use before and after.
rollout env du
  Disk use of the image cache.`;

const mb = (bytes: number): string => `${(bytes / 1e6).toFixed(0)} MB`;
const describeUse = (u: DiskUse): string =>
  `${u.taskImages} task images, ${u.baseImages} bases; root filesystems ${mb(u.rootfsBytes)}, podman storage ${mb(u.storageBytes)}, verifier wheels ${mb(u.wheelBytes)}`;

function asUsage<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof ClassifiedError && err.failureClass !== 'model') throw new UsageError(err.message);
    throw err;
  }
}

async function build(rest: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(rest, { command: 'env build', usage: envUsage, options: { json: { type: 'boolean', default: false } }, allowPositionals: true });
  if (positionals.length === 0) throw new UsageError(`name at least one task directory; usage:\n${envUsage}`);
  const tasks = positionals.map((dir) => asUsage(() => loadTask(dir)));
  const results: unknown[] = [];
  let failed = 0;
  for (const task of tasks) {
    for (const warning of task.warnings) process.stderr.write(`warning: ${task.id}: ${warning}\n`);
    try {
      const { image, cacheHit, ms } = await ensureTaskImage(task, { log: (line) => process.stderr.write(`${line}\n`) });
      results.push({ task: task.id, cacheHit, ms: Math.round(ms), ...image });
      if (!values.json) {
        process.stdout.write(
          `${cacheHit ? 'cached' : 'built '}  ${task.id}  ${image.tag}  ${image.imageId.slice(0, 19)}  ${cacheHit ? `hit in ${Math.round(ms)} ms` : `build ${(image.buildMs / 1000).toFixed(1)} s`}  ${mb(image.sizeBytes)}\n`,
        );
        process.stdout.write(`  ${imageIdentity(image)}\n`);
        for (const note of image.verifier.notes) process.stdout.write(`  note: ${note}\n`);
      }
    } catch (err) {
      failed++;
      const message = err instanceof Error ? err.message : String(err);
      results.push({ task: task.id, error: message });
      process.stdout.write(`FAILED  ${task.id}: ${message}\n`);
    }
  }
  if (values.json) process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
  return failed === 0 ? 0 : 1;
}

export async function envCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === 'build') return build(rest);
  if (sub !== 'gc' && wantsHelp(argv)) throw new HelpRequested(envUsage);
  if (sub === 'du') {
    process.stdout.write(`${describeUse(await diskUse(asUsage(() => imageTools())))}\n`);
    return 0;
  }
  if (sub === 'gc') {
    const { values } = parseCommandLine(rest, { command: 'env gc', usage: envUsage, options: { 'unused-for': { type: 'string', default: '168' }, 'dry-run': { type: 'boolean', default: false } } });
    const hours = Number(values['unused-for']);
    if (!Number.isFinite(hours) || hours < 0) throw new UsageError(`--unused-for ${values['unused-for']}: give hours as a number >= 0`);
    const report = await gcImages(asUsage(() => imageTools()), { unusedForMs: hours * 3600_000, dryRun: values['dry-run'] });
    for (const tag of report.removedImages) process.stdout.write(`${values['dry-run'] ? 'would remove' : 'removed'} ${tag}\n`);
    for (const tag of report.removedBases) process.stdout.write(`${values['dry-run'] ? 'would remove' : 'removed'} base ${tag}\n`);
    for (const tag of report.kept) process.stdout.write(`kept ${tag}\n`);
    if (report.leftoverContainers.length > 0)
      process.stdout.write(
        `removed ${report.leftoverContainers.length} working container(s) that killed builds left: ${report.leftoverContainers.join(', ')}\n`,
      );
    process.stdout.write(`before: ${describeUse(report.before)}\nafter:  ${describeUse(report.after)}\n`);
    return 0;
  }
  throw new UsageError(`unknown env subcommand ${JSON.stringify(sub ?? '')}; usage:\n${envUsage}`);
}
