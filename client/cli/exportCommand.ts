/** `rollout export <batch> --out FILE`: a batch's training samples as JSONL, one line per valid rollout. */
import { openTrajectoryStore } from '../../stores/openTrajectoryStore.js';
import { batchServerFromFlags } from '../batchServer/batchServerFromFlags.js';
import { exportBatch } from '../export/exportBatch.js';
import { dataDir } from './cliSettings.js';
import { parseCommandLine } from './commandLine.js';
import { UsageError } from './usageError.js';

export const exportUsage = `rollout export <batch-id> --out FILE [--keep-broken] [--keep-mismatched-logprobs] [--store fs|fs:DIR|postgres://...] [--trajectories DIR] [--data-dir DIR] [--address HOST:PORT]
  Writes the training samples of the batch's finished groups as JSONL, one line per valid rollout
  (from the attempt that produced its reward), or per training segment of it (below). Fields of each line:
    rollout_id        the rollout's workflow id (rollout/<batch>/<task>/<index>)
    group_id          the group's workflow id (rollout/<batch>/<task>); batch_id, task_id, rollout_index
    task_version      sha256 of the task's files
    input_ids         token ids: the last turn's prompt + completion, which holds every earlier turn
                      (exact-prefix rule: each prompt begins with the previous prompt + completion)
    loss_mask         1 on tokens the policy generated, 0 on prompt, tool results and template tokens
    logprobs          the logprob of each generated token under the distribution that sampled it (the
                      server's post-sampling probabilities, or its raw ones where nothing reshaped them),
                      aligned to input_ids; null where loss_mask is 0
    temperatures      the sampling temperature of each generated token, aligned to input_ids; null elsewhere
    logprob_mismatch  null, or "turn k: why" when a turn's logprobs are not its sampling distribution's
    completion_spans  [start, end) of each turn's completion in input_ids (null: a turn left unmasked)
    reward            the verifier's reward
    advantage         the GRPO advantage over the group's valid rollouts
    policy_versions   the policy version that generated each turn, in order
    staleness, stale  the group's final policy version minus the oldest turn's; past staleness.maxStaleness
    parent_rollout_id, branch_turn, prefix_length
                      for a branch (rollout branch): the rollout it branched from, the turn, and how many
                      tokens at the start of input_ids it shares with it and its siblings; null otherwise
    sibling_advantages  with branching in the group: [{parent_rollout_id, branch_turn, advantage}], its
                      advantage within each set of siblings it belongs to (a rollout that branched at a
                      turn and its branches there); [] otherwise
    segment, segments, segment_turns
                      which training segment of the rollout this line is (0-based), how many it has, and
                      its turns [first, end): a harness (policy harness:NAME) that rewrote its history
                      breaks the exact-prefix rule by design, and each stretch of turns that extend one
                      another is its own line with the rollout's reward and advantage; 0, 1 and all turns
                      otherwise (docs/harnesses.md)
    outcome           {class, type}: ok/submitted, model/max_turns, ...
    token_integrity   {status ok|broken|missing, attempt, turns, turn, position, reason, unmasked_turns,
                      segmentStarts (turns that start a new segment)}:
                      where the exact-prefix rule broke (turn, token position) or why ids are missing
  Rollouts that are not valid (masked, cancelled, dropped groups) are never exported. Rollouts whose
  token integrity broke or that lack token ids (a server that returns none, a scripted policy) are
  left out unless --keep-broken (broken turns stay unmasked; missing ids give empty arrays).
  Rollouts a turn of which has logprobs that are not those of the distribution that sampled its
  tokens (greedy sampling, a server's raw logprobs of a reshaped distribution, a tool-call grammar,
  records made before sampling was kept) are left out unless --keep-mismatched-logprobs (for a
  trainer that recomputes logprobs); each kept one says why in logprob_mismatch.
  Every rollout left out is counted and listed with why on stderr. Exit 0 when something was exported.`;

export async function exportCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, {
    command: 'export',
    usage: exportUsage,
    options: {
      out: { type: 'string' },
      'keep-broken': { type: 'boolean' },
      'keep-mismatched-logprobs': { type: 'boolean' },
      trajectories: { type: 'string' },
      store: { type: 'string' },
      'data-dir': { type: 'string' },
      address: { type: 'string' },
    },
    allowPositionals: true,
  });
  const [batchId] = positionals;
  if (!batchId || positionals.length > 1) throw new UsageError(`name one batch id\n${exportUsage}`);
  if (!/^[A-Za-z0-9._-]+$/.test(batchId)) throw new UsageError(`batch id ${JSON.stringify(batchId)} has characters batch ids never have`);
  if (!values.out) throw new UsageError(`--out FILE is required (where the JSONL goes)\n${exportUsage}`);
  const store = await openTrajectoryStore(values.trajectories !== undefined ? `fs:${values.trajectories}` : (values.store ?? process.env.ROLLOUT_STORE), dataDir(values['data-dir']));
  const server = await batchServerFromFlags(values, batchId).catch(async (err: unknown) => {
    await store.close();
    throw err;
  });
  const temporal = server.client;
  try {
    const report = await exportBatch(temporal, store, batchId, values.out, { keepBroken: values['keep-broken'] ?? false, keepMismatchedLogprobs: values['keep-mismatched-logprobs'] ?? false });
    const count = (why: string): number => report.excluded.filter((e) => e.why === why).length;
    process.stdout.write(
      `${report.exported} samples from ${report.groups} finished groups of batch ${batchId} → ${values.out}` +
        `${report.keptBroken ? ` (${report.keptBroken} with broken or missing tokens kept: --keep-broken)` : ''}` +
        `${report.keptMismatched ? ` (${report.keptMismatched} with logprobs not of their sampling distribution kept: --keep-mismatched-logprobs)` : ''}\n` +
        `left out: ${count('broken')} with a token prefix break, ${count('missing')} without token ids, ${count('logprobs')} whose logprobs are not their sampling distribution's, ${count('not_valid')} not valid` +
        `${report.unfinishedGroups ? `; ${report.unfinishedGroups} groups not finished yet` : ''}\n`,
    );
    for (const e of report.excluded) process.stderr.write(`left out ${e.rollout_id}: ${e.why}: ${e.reason}\n`);
    return report.exported > 0 ? 0 : 1;
  } finally {
    await server.close();
    await store.close();
  }
}
