/**
 * pino JSON logs for workers; the Temporal SDK's own log lines go through the
 * same logger (warnings and errors only, unless LOG_LEVEL says otherwise).
 */
import { DefaultLogger, Runtime, type LogLevel } from '@temporalio/worker';
import { pino, type Logger } from 'pino';

export function createLogger(name = 'rollout-pipeline'): Logger {
  return pino({ name, level: process.env.LOG_LEVEL ?? 'info' });
}

let installed = false;

/** Routes the SDK's logs into `logger`. Call before creating any worker; later calls do nothing. */
export function installSdkLogger(logger: Logger): void {
  if (installed) return;
  installed = true;
  const level = (process.env.TEMPORAL_LOG_LEVEL ?? 'WARN') as LogLevel;
  try {
    Runtime.install({
      logger: new DefaultLogger(level, (entry) => {
        const method = entry.level === 'ERROR' ? 'error' : entry.level === 'WARN' ? 'warn' : entry.level === 'INFO' ? 'info' : 'debug';
        logger[method]({ sdk: entry.meta }, entry.message);
      }),
    });
  } catch {
    // a Runtime already exists in this process (a test created a connection first): keep it
  }
}
