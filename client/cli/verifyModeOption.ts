/** `--verify in-place|clean-room`, as `rollout run` and `rollout task check` take it. */
import type { VerifyMode } from '../../verifier/runVerifier.js';
import { UsageError } from './usageError.js';

export function parseVerifyMode(value: string | undefined): VerifyMode | undefined {
  if (value === undefined || value === 'in-place' || value === 'clean-room') return value;
  throw new UsageError(`--verify is in-place or clean-room, got ${JSON.stringify(value)}`);
}
