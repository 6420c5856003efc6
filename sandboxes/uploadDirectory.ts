/**
 * Copies a host directory into a sandbox through the provider interface
 * (works for every provider), keeping executable bits.
 */
import { readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { SandboxHandle, SandboxProvider } from '../shared/sandbox.js';
import { listFiles } from '../shared/hashTree.js';

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

export async function uploadDirectory(provider: SandboxProvider, handle: SandboxHandle, hostDir: string, sandboxDir: string): Promise<string[]> {
  const written: string[] = [];
  const executables: string[] = [];
  for (const file of listFiles(hostDir)) {
    const target = join(sandboxDir, relative(hostDir, file));
    await provider.writeFile(handle, target, readFileSync(file));
    written.push(target);
    if ((statSync(file).mode & 0o111) !== 0) executables.push(target);
  }
  if (executables.length > 0) {
    const r = await provider.exec(handle, `chmod +x ${executables.map(shellQuote).join(' ')}`, { timeoutMs: 30_000 });
    if (r.exitCode !== 0) throw new Error(`chmod in sandbox failed: ${r.stderr}`);
  }
  return written;
}

export { shellQuote };
