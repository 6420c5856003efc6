/**
 * `rollout server`: runs the Temporal dev server in the foreground with the
 * project's search attributes registered, until Ctrl-C.
 */
import { startDevServer } from '../../servers/temporalDevServer.js';
import { parseCommandLine } from './commandLine.js';
import { UsageError } from './usageError.js';

export const serverUsage = `rollout server [--port N] [--ui-port N | --headless] [--db-filename FILE] [--ip ADDR]
  Starts \`temporal server start-dev\` with rollout-pipeline's search attributes.
  --port        frontend gRPC port (default 7233)
  --ui-port     Web UI port (default 8233)
  --headless    no Web UI
  --db-filename SQLite file that keeps workflows across restarts (default: in memory)`;

function parsePort(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new UsageError(`--${name} must be a TCP port between 1 and 65535, got ${JSON.stringify(value)}`);
  }
  return port;
}

export async function serverCommand(argv: string[]): Promise<number> {
  const { values } = parseCommandLine(argv, {
    command: 'server',
    usage: serverUsage,
    options: {
      port: { type: 'string' },
      'ui-port': { type: 'string' },
      headless: { type: 'boolean', default: false },
      'db-filename': { type: 'string' },
      ip: { type: 'string', default: '127.0.0.1' },
    },
  });
  if (values.headless && values['ui-port'] !== undefined) throw new UsageError('--headless and --ui-port exclude each other');
  const server = await startDevServer({
    ip: values.ip,
    port: parsePort('port', values.port, 7233),
    uiPort: values.headless ? false : parsePort('ui-port', values['ui-port'], 8233),
    ...(values['db-filename'] ? { dbFilename: values['db-filename'] } : {}),
  });
  process.stdout.write(
    `Temporal dev server ${server.binary.version} (${server.binary.path})\n` +
      `  address  ${server.address}\n  Web UI   ${server.uiUrl ?? 'off (--headless)'}\n  log      ${server.logFile}\n` +
      'Ctrl-C stops it.\n',
  );
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await server.stop();
  return 0;
}
