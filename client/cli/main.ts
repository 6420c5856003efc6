/**
 * The `rollout` command line. Bad input and missing prerequisites print one
 * clear message and exit 2; anything else unexpected exits 1.
 */
import { closestName } from './closestName.js';
import { HelpRequested } from './commandLine.js';
import { UsageError } from './usageError.js';

interface Command {
  run: (argv: string[]) => Promise<number>;
  usage: string;
}

/**
 * Each command's module, loaded only when that command runs (or its help is asked for): a start of
 * `rollout status` does not load the Temporal worker that `rollout run` and `rollout worker` need
 * (seconds of CPU per start on a loaded machine).
 */
const commands: Record<string, () => Promise<Command>> = {
  run: async () => import('./runCommand.js').then((m) => ({ run: m.runCommand, usage: m.runUsage })),
  status: async () => import('./statusCommand.js').then((m) => ({ run: m.statusCommand, usage: m.statusUsage })),
  report: async () => import('./reportCommand.js').then((m) => ({ run: m.reportCommand, usage: m.reportUsage })),
  show: async () => import('./showCommand.js').then((m) => ({ run: m.showCommand, usage: m.showUsage })),
  export: async () => import('./exportCommand.js').then((m) => ({ run: m.exportCommand, usage: m.exportUsage })),
  'policy-version': async () => import('./policyVersionCommand.js').then((m) => ({ run: m.policyVersionCommand, usage: m.policyVersionUsage })),
  worker: async () => import('./workerCommand.js').then((m) => ({ run: m.workerCommand, usage: m.workerUsage })),
  task: async () => import('./taskCommand.js').then((m) => ({ run: m.taskCommand, usage: m.taskUsage })),
  gc: async () => import('./gcCommand.js').then((m) => ({ run: m.gcCommand, usage: m.gcUsage })),
  env: async () => import('./envCommand.js').then((m) => ({ run: m.envCommand, usage: m.envUsage })),
  cancel: async () => import('./cancelCommand.js').then((m) => ({ run: m.cancelCommand, usage: m.cancelUsage })),
  replay: async () => import('./replayCommand.js').then((m) => ({ run: m.replayCommand, usage: m.replayUsage })),
  rerun: async () => import('./rerunCommand.js').then((m) => ({ run: m.rerunCommand, usage: m.rerunUsage })),
  branch: async () => import('./branchCommand.js').then((m) => ({ run: m.branchCommand, usage: m.branchUsage })),
  'replay-history': async () => import('./replayHistoryCommand.js').then((m) => ({ run: m.replayHistoryCommand, usage: m.replayHistoryUsage })),
  server: async () => import('./serverCommand.js').then((m) => ({ run: m.serverCommand, usage: m.serverUsage })),
  cluster: async () => import('./clusterCommand.js').then((m) => ({ run: m.clusterCommand, usage: m.clusterUsage })),
};

async function usage(): Promise<string> {
  const all = await Promise.all(Object.values(commands).map((load) => load()));
  return `usage: rollout <command> [options]\n\ncommands:\n${all.map((c) => `  ${c.usage.split('\n').join('\n  ')}`).join('\n\n')}\n`;
}

function commandNamed(name: string): Promise<Command> {
  const command = commands[name];
  if (command) return command();
  const suggestion = closestName(name, Object.keys(commands));
  throw new UsageError(`unknown command ${JSON.stringify(name)}${suggestion ? `; did you mean ${suggestion}?` : ''} (known: ${Object.keys(commands).join(', ')}; rollout help CMD shows one)`);
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || (name === 'help' && rest.length === 0)) {
    process.stdout.write(await usage());
    return name ? 0 : 2;
  }
  if (name === 'help') throw new HelpRequested((await commandNamed(rest[0]!)).usage);
  return (await commandNamed(name)).run(rest);
}

/** Errors that are the user's to fix: one line and exit 2. Their modules are loaded only when a command failed. */
async function isUsersToFix(err: unknown): Promise<boolean> {
  if (err instanceof UsageError) return true;
  const classes = await Promise.all([
    import('../../servers/temporalBinary.js').then((m) => m.TemporalBinaryError),
    import('../../stores/openTrajectoryStore.js').then((m) => m.StoreSettingError),
    import('../../sandboxes/openSandboxProvider.js').then((m) => m.ProviderSettingError),
    import('../../workers/temporalConnection.js').then((m) => m.TemporalSettingError),
    import('../outage/serverWait.js').then((m) => m.ServerUnreachableError),
    import('../batchServer/openBatchServer.js').then((m) => [m.BatchNotFoundError, m.NoServerError]),
    import('../../cluster/localCluster.js').then((m) => m.ClusterStartError),
    import('../../cluster/temporalServerBinary.js').then((m) => m.TemporalServerBinaryError),
    import('../../cluster/postgresServer.js').then((m) => m.PostgresStartError),
    import('../../cluster/temporalSchema.js').then((m) => m.TemporalSchemaError),
    import('../../cluster/temporalServiceProcess.js').then((m) => m.TemporalServiceStartError),
    import('../../cluster/namespaceSetup.js').then((m) => m.NamespaceSetupError),
  ]);
  return classes.flat().some((c) => err instanceof c);
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (err) {
  if (err instanceof HelpRequested) {
    process.stdout.write(`usage: ${err.usage}\n`);
    process.exitCode = 0;
  } else if (await isUsersToFix(err)) {
    process.stderr.write(`rollout: ${(err as Error).message}\n`);
    process.exitCode = 2;
  } else {
    process.stderr.write(`rollout: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  }
}
// Every command has awaited its own cleanup (workers, connections, servers) by now, and stdout/stderr
// writes are synchronous on Linux: exit instead of waiting several seconds for the Temporal Runtime's
// native threads to wind down (measured ~6 s after an embedded run), so a Ctrl-C'd run exits promptly.
process.exit();
