/** What the harness policy's suites share: whether a harness is installed here, and a batch run to its results. */
import { installedHarness } from '../../harnesses/harnessInstall.js';
import { submitBatch, type SubmitBatchOptions } from '../../client/submitBatch.js';
import type { GroupResult } from '../../shared/pipeline.js';
import type { Harness } from './pipelineHarness.js';

/** false when the harness is installed on this host, else why its tests are skipped. */
export function skipWithoutHarnessNamed(harness: string): string | false {
  try {
    installedHarness(harness, 'this host');
    return false;
  } catch (err) {
    return `needs ${harness} installed: ${(err as Error).message}`;
  }
}

export async function runHarnessBatch(h: Harness, batchId: string, options: Omit<SubmitBatchOptions, 'batchId' | 'taskQueues'>): Promise<{ batchId: string; groups: GroupResult[] }> {
  const batch = await submitBatch(h.client, { batchId, taskQueues: h.taskQueues, ...options });
  const groups: GroupResult[] = [];
  for await (const g of batch.results()) groups.push(g);
  return { batchId, groups };
}
