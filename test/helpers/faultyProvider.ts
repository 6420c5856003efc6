/**
 * A fault injector around a real sandbox provider: fails chosen provisions,
 * or kills a sandbox from outside (as a lost host would) before a chosen exec.
 * Everything else goes to the real provider.
 */
import { ClassifiedError } from '../../shared/failures.js';
import { localHandle, type ExecOptions, type ExecResult, type ProvisionResult, type ReadFileOptions, type SandboxHandle, type SandboxProvider, type SandboxRecord, type SandboxSpec, type TeardownReport } from '../../shared/sandbox.js';

export interface Faults {
  /** Return true to fail this provision (called with the spec and how many provisions came before). */
  failProvision?: (spec: SandboxSpec, count: number) => boolean;
  /** Milliseconds to stall after the sandbox is ready, before provision returns (a slow, loaded host). */
  provisionDelayMs?: number;
  /** Return true to kill the sandbox just before this exec runs. */
  killBeforeExec?: (handle: SandboxHandle, command: string, count: number) => boolean;
}

export class FaultyProvider implements SandboxProvider {
  readonly name: string;
  provisions = 0;
  execs = 0;
  injected = 0;

  constructor(
    private readonly inner: SandboxProvider,
    private readonly faults: Faults,
  ) {
    this.name = inner.name;
  }

  async provision(spec: SandboxSpec): Promise<ProvisionResult> {
    if (this.faults.failProvision?.(spec, this.provisions++)) {
      this.injected++;
      throw new ClassifiedError('infra', 'provision_failed', 'injected: the sandbox could not be provisioned');
    }
    const made = await this.inner.provision(spec);
    if (this.faults.provisionDelayMs) await new Promise((r) => setTimeout(r, this.faults.provisionDelayMs));
    return made;
  }

  async exec(handle: SandboxHandle, command: string, options?: ExecOptions): Promise<ExecResult> {
    if (this.faults.killBeforeExec?.(handle, command, this.execs++)) {
      this.injected++;
      process.kill(localHandle(handle).pid, 'SIGKILL');
      await new Promise((r) => setTimeout(r, 50));
    }
    return this.inner.exec(handle, command, options);
  }

  writeFile(handle: SandboxHandle, path: string, content: string | Uint8Array): Promise<void> {
    return this.inner.writeFile(handle, path, content);
  }

  readFile(handle: SandboxHandle, path: string, options?: ReadFileOptions): Promise<Uint8Array> {
    return this.inner.readFile(handle, path, options);
  }

  teardown(handleOrId: SandboxHandle | string): Promise<TeardownReport> {
    return this.inner.teardown(handleOrId);
  }

  list(labels?: Record<string, string>): Promise<SandboxRecord[]> {
    return this.inner.list(labels);
  }

  renewLease(handle: SandboxHandle, leaseMs: number): Promise<void> {
    return this.inner.renewLease(handle, leaseMs);
  }
}
