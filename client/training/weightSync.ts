/**
 * Trained weights to the inference server: the llama.cpp server restarted on its own port with a
 * LoRA adapter GGUF (rollout_trainer.grpo --convert writes one). A sync that fails leaves the server
 * on the weights it had: when the new server does not come up (a file that is no adapter, an adapter
 * of another model), the old one is started again with its previous adapter, on the same port, and
 * the error names the file and what llama.cpp said. The caller advances the policy version only after
 * a sync returned (`rollout policy-version` for running batches, the batch's `policyVersion` for new ones).
 *
 * The server is down between the stop and the new server's /health (seconds here: the model loads
 * from the page cache); rollouts in flight then see connection errors, which the policy classifies as
 * infra and retries. Sync between batches, or pause admissions around it, to avoid those.
 */
import { closeSync, openSync, readSync } from 'node:fs';
import { LlamaServerStartError, startLlamaServer, type LlamaServerOptions, type RunningLlamaServer } from '../../servers/inference/llamaServer.js';

export class WeightSyncError extends Error {
  constructor(
    message: string,
    /** The server now running: the previous weights (restarted), or undefined when even that failed. */
    readonly server: RunningLlamaServer | undefined,
  ) {
    super(message);
    this.name = 'WeightSyncError';
  }
}

export interface SyncedServer {
  server: RunningLlamaServer;
  /** From stopping the old server to the new one answering /health. */
  downMs: number;
}

function looksLikeGguf(path: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    return `cannot be read (${(err as Error).message})`;
  }
  try {
    const magic = Buffer.alloc(4);
    return readSync(fd, magic, 0, 4, 0) === 4 && magic.toString('latin1') === 'GGUF' ? undefined : 'is not a GGUF file (no GGUF magic)';
  } finally {
    closeSync(fd);
  }
}

/**
 * Restarts `server` (started with `options`) with the adapter `adapterGguf` on the same port.
 * Resolves with the new server; rejects with WeightSyncError, the old weights serving again.
 */
export async function syncAdapter(server: RunningLlamaServer, options: LlamaServerOptions, adapterGguf: string): Promise<SyncedServer> {
  const unreadable = looksLikeGguf(adapterGguf);
  if (unreadable)
    throw new WeightSyncError(
      `adapter ${adapterGguf} ${unreadable}: convert the trained adapter first (python -m rollout_trainer.grpo --out DIR --convert writes DIR/adapter.gguf); the server keeps its weights`,
      server,
    );
  const previous = server.lora?.path;
  const started = performance.now();
  await server.stop();
  try {
    const next = await startLlamaServer({ ...options, port: server.port, lora: adapterGguf });
    return { server: next, downMs: performance.now() - started };
  } catch (err) {
    if (!(err instanceof LlamaServerStartError)) throw err;
    const reason = err.message;
    let restored: RunningLlamaServer | undefined;
    try {
      restored = await startLlamaServer({ ...options, port: server.port, ...(previous ? { lora: previous } : {}) });
    } catch (again) {
      throw new WeightSyncError(
        `the llama.cpp server did not start with adapter ${adapterGguf}, nor again with its previous weights (${previous ?? 'the model alone'}): ${(again as Error).message}\nwith the adapter: ${reason}`,
        undefined,
      );
    }
    throw new WeightSyncError(
      `the llama.cpp server refused adapter ${adapterGguf}; it serves its previous weights again (${previous ?? 'the model alone'}), the policy version stays. llama.cpp said:\n${reason}`,
      restored,
    );
  }
}
