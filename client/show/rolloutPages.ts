/**
 * The rollout pages of a batch report: one `rollout show --html` page per
 * rollout, in a folder beside the report (`report.html` → `report-rollouts/`),
 * linked from the report and back by relative links, so they work opened
 * from disk.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { TrajectoryStore } from '../../stores/trajectoryStore.js';
import type { GroupResult, RolloutResult } from '../../shared/pipeline.js';
import type { RolloutState } from './readRolloutState.js';
import { rolloutHtml } from './rolloutHtml.js';
import { buildRolloutView } from './rolloutView.js';
import type { ViewOptions } from './turnView.js';

export interface RolloutPages {
  dir: string;
  written: number;
  /** The link from the report to a rollout's page. */
  href: (workflowId: string) => string | undefined;
}

/** A finished rollout as its group reported it (with its advantage); nothing more to ask Temporal. */
function finishedState(group: GroupResult, result: RolloutResult): RolloutState {
  return {
    workflowId: result.workflowId,
    status: 'completed',
    batchId: group.batchId,
    taskId: group.taskId,
    index: result.index,
    trajectoryRef: result.trajectoryRef,
    startTime: undefined,
    closeTime: undefined,
    result,
    advantage: result.advantage,
  };
}

export function rolloutPagesDir(reportFile: string): string {
  return join(dirname(reportFile), `${basename(reportFile).replace(/\.html?$/i, '')}-rollouts`);
}

export async function writeRolloutPages(reportFile: string, groups: GroupResult[], store: TrajectoryStore, options: ViewOptions): Promise<RolloutPages> {
  const dir = rolloutPagesDir(reportFile);
  mkdirSync(dir, { recursive: true });
  // encodeURIComponent keeps file names one-to-one with task ids whatever characters a task directory has.
  const fileOf = (taskId: string, index: number): string => `${encodeURIComponent(taskId)}-${index}.html`;
  const files = new Map<string, string>();
  const backHref = `../${encodeURIComponent(basename(reportFile))}`;
  for (const group of groups) {
    for (const result of group.rollouts) {
      const file = fileOf(group.taskId, result.index);
      const view = await buildRolloutView(finishedState(group, result), store, options);
      writeFileSync(join(dir, file), rolloutHtml(view, { back: { href: backHref, label: `batch ${group.batchId} report` } }));
      files.set(result.workflowId, file);
    }
  }
  const folder = encodeURIComponent(basename(dir));
  return {
    dir,
    written: files.size,
    href: (workflowId) => {
      const file = files.get(workflowId);
      return file === undefined ? undefined : `${folder}/${encodeURIComponent(file)}`;
    },
  };
}
