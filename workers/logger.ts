/** pino JSON logs for workers; every line of an activity carries its workflow id, rollout and attempt. */
import { pino, type Logger } from 'pino';

export function createLogger(name = 'rollout-pipeline'): Logger {
  return pino({ name, level: process.env.LOG_LEVEL ?? 'info' });
}
