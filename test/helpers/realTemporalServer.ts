/**
 * The real Temporal server's binaries for the cluster suites, or the reason they skip: a machine
 * without the `test` set-up (scripts/ensure-temporal-server.sh) runs the rest of the tests.
 */
import { resolveTemporalServer, TemporalServerBinaryError, type TemporalServerBinaries } from '../../cluster/temporalServerBinary.js';

export function realTemporalServer(): { binaries: TemporalServerBinaries | undefined; skip: string | false } {
  try {
    return { binaries: resolveTemporalServer(), skip: false };
  } catch (err) {
    if (err instanceof TemporalServerBinaryError) return { binaries: undefined, skip: `no real Temporal server here (${err.message})` };
    throw err;
  }
}
