/**
 * Opens a Temporal client for a command that waits for its server (rollout
 * run, rollout status): a server that is down or restarting at the moment is
 * waited for (said once on stderr) for up to `maxWaitMs`, then a clear error
 * names the address and the fix.
 */
import { openTemporalClient, type TemporalSettings } from '../../workers/temporalConnection.js';
import { serverWait, type ServerWait } from './serverWait.js';

export async function openClientThroughOutage(
  settings: TemporalSettings,
  options: { maxWaitMs?: number; signal?: AbortSignal } = {},
): Promise<Awaited<ReturnType<typeof openTemporalClient>> & { wait: ServerWait }> {
  const wait = serverWait(settings.address);
  const opened = await wait.retry('a connection', () => openTemporalClient(settings, { timeoutMs: 5_000 }), {
    maxWaitMs: options.maxWaitMs ?? 5 * 60_000,
    ...(options.signal ? { signal: options.signal } : {}),
  });
  return { ...opened, wait };
}
