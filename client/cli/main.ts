/**
 * The `rollout` command line. Bad input and missing prerequisites print one
 * clear message and exit 2; anything else unexpected exits 1.
 */
import { ProviderSettingError } from '../../activities/sandbox/openSandboxProvider.js';
import { StoreSettingError } from '../../activities/store/openTrajectoryStore.js';
import { TemporalBinaryError } from '../../workers/temporalBinary.js';
import { TemporalSettingError } from '../../workers/temporalConnection.js';
import { serverCommand, serverUsage } from './serverCommand.js';
import { clusterCommand, clusterUsage } from './clusterCommand.js';
import { ClusterStartError } from '../../cluster/localCluster.js';
import { NamespaceSetupError } from '../../cluster/namespaceSetup.js';
import { PostgresStartError } from '../../cluster/postgresServer.js';
import { TemporalServerBinaryError } from '../../cluster/temporalServerBinary.js';
import { TemporalSchemaError } from '../../cluster/temporalSchema.js';
import { TemporalServiceStartError } from '../../cluster/temporalServiceProcess.js';
import { branchCommand, branchUsage } from './branchCommand.js';
import { cancelCommand, cancelUsage } from './cancelCommand.js';
import { exportCommand, exportUsage } from './exportCommand.js';
import { envCommand, envUsage } from './envCommand.js';
import { gcCommand, gcUsage } from './gcCommand.js';
import { policyVersionCommand, policyVersionUsage } from './policyVersionCommand.js';
import { rerunCommand, rerunUsage } from './rerunCommand.js';
import { replayCommand, replayUsage } from './replayCommand.js';
import { replayHistoryCommand, replayHistoryUsage } from './replayHistoryCommand.js';
import { reportCommand, reportUsage } from './reportCommand.js';
import { runCommand, runUsage } from './runCommand.js';
import { showCommand, showUsage } from './showCommand.js';
import { statusCommand, statusUsage } from './statusCommand.js';
import { taskCommand, taskUsage } from './taskCommand.js';
import { workerCommand, workerUsage } from './workerCommand.js';
import { closestName } from './closestName.js';
import { HelpRequested } from './commandLine.js';
import { UsageError } from './usageError.js';
import { ServerUnreachableError } from '../outage/serverWait.js';
import { BatchNotFoundError, NoServerError } from '../batchServer/openBatchServer.js';

const commands: Record<string, { run: (argv: string[]) => Promise<number>; usage: string }> = {
  run: { run: runCommand, usage: runUsage },
  status: { run: statusCommand, usage: statusUsage },
  report: { run: reportCommand, usage: reportUsage },
  show: { run: showCommand, usage: showUsage },
  export: { run: exportCommand, usage: exportUsage },
  'policy-version': { run: policyVersionCommand, usage: policyVersionUsage },
  worker: { run: workerCommand, usage: workerUsage },
  task: { run: taskCommand, usage: taskUsage },
  gc: { run: gcCommand, usage: gcUsage },
  env: { run: envCommand, usage: envUsage },
  cancel: { run: cancelCommand, usage: cancelUsage },
  replay: { run: replayCommand, usage: replayUsage },
  rerun: { run: rerunCommand, usage: rerunUsage },
  branch: { run: branchCommand, usage: branchUsage },
  'replay-history': { run: replayHistoryCommand, usage: replayHistoryUsage },
  server: { run: serverCommand, usage: serverUsage },
  cluster: { run: clusterCommand, usage: clusterUsage },
};

const usage = `usage: rollout <command> [options]\n\ncommands:\n${Object.values(commands)
  .map((c) => `  ${c.usage.split('\n').join('\n  ')}`)
  .join('\n\n')}\n`;

function commandNamed(name: string): (typeof commands)[string] {
  const command = commands[name];
  if (command) return command;
  const suggestion = closestName(name, Object.keys(commands));
  throw new UsageError(`unknown command ${JSON.stringify(name)}${suggestion ? `; did you mean ${suggestion}?` : ''} (known: ${Object.keys(commands).join(', ')}; rollout help CMD shows one)`);
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || (name === 'help' && rest.length === 0)) {
    process.stdout.write(usage);
    return name ? 0 : 2;
  }
  if (name === 'help') throw new HelpRequested(commandNamed(rest[0]!).usage);
  return commandNamed(name).run(rest);
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (err) {
  if (err instanceof HelpRequested) {
    process.stdout.write(`usage: ${err.usage}\n`);
    process.exitCode = 0;
  } else if (
    err instanceof UsageError || err instanceof TemporalBinaryError || err instanceof StoreSettingError || err instanceof ProviderSettingError || err instanceof TemporalSettingError || err instanceof ServerUnreachableError || err instanceof BatchNotFoundError || err instanceof NoServerError ||
    err instanceof ClusterStartError || err instanceof TemporalServerBinaryError || err instanceof PostgresStartError || err instanceof TemporalSchemaError || err instanceof TemporalServiceStartError || err instanceof NamespaceSetupError
  ) {
    process.stderr.write(`rollout: ${err.message}\n`);
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
