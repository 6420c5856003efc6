/**
 * The `rollout` command line. Bad input and missing prerequisites print one
 * clear message and exit 2; anything else unexpected exits 1.
 */
import { ProviderSettingError } from '../../activities/sandbox/openSandboxProvider.js';
import { StoreSettingError } from '../../activities/store/openTrajectoryStore.js';
import { TemporalBinaryError } from '../../workers/temporalBinary.js';
import { TemporalSettingError } from '../../workers/temporalConnection.js';
import { serverCommand, serverUsage } from './serverCommand.js';
import { cancelCommand, cancelUsage } from './cancelCommand.js';
import { envCommand, envUsage } from './envCommand.js';
import { gcCommand, gcUsage } from './gcCommand.js';
import { rerunCommand, rerunUsage } from './rerunCommand.js';
import { replayCommand, replayUsage } from './replayCommand.js';
import { replayHistoryCommand, replayHistoryUsage } from './replayHistoryCommand.js';
import { reportCommand, reportUsage } from './reportCommand.js';
import { runCommand, runUsage } from './runCommand.js';
import { statusCommand, statusUsage } from './statusCommand.js';
import { taskCommand, taskUsage } from './taskCommand.js';
import { workerCommand, workerUsage } from './workerCommand.js';
import { UsageError } from './usageError.js';

const commands: Record<string, { run: (argv: string[]) => Promise<number>; usage: string }> = {
  run: { run: runCommand, usage: runUsage },
  status: { run: statusCommand, usage: statusUsage },
  report: { run: reportCommand, usage: reportUsage },
  worker: { run: workerCommand, usage: workerUsage },
  task: { run: taskCommand, usage: taskUsage },
  gc: { run: gcCommand, usage: gcUsage },
  env: { run: envCommand, usage: envUsage },
  cancel: { run: cancelCommand, usage: cancelUsage },
  replay: { run: replayCommand, usage: replayUsage },
  rerun: { run: rerunCommand, usage: rerunUsage },
  'replay-history': { run: replayHistoryCommand, usage: replayHistoryUsage },
  server: { run: serverCommand, usage: serverUsage },
};

const usage = `usage: rollout <command> [options]\n\ncommands:\n${Object.values(commands)
  .map((c) => `  ${c.usage.split('\n').join('\n  ')}`)
  .join('\n\n')}\n`;

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(usage);
    return name ? 0 : 2;
  }
  const command = commands[name];
  if (!command) throw new UsageError(`unknown command ${JSON.stringify(name)}; known: ${Object.keys(commands).join(', ')}`);
  return command.run(rest);
}

function isArgParseError(err: unknown): err is Error & { code: string } {
  return err instanceof Error && 'code' in err && typeof err.code === 'string' && err.code.startsWith('ERR_PARSE_ARGS');
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (err) {
  if (err instanceof UsageError || err instanceof TemporalBinaryError || err instanceof StoreSettingError || err instanceof ProviderSettingError || err instanceof TemporalSettingError || isArgParseError(err)) {
    process.stderr.write(`rollout: ${err.message}\n`);
    process.exitCode = 2;
  } else {
    process.stderr.write(`rollout: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  }
}
