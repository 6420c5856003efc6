/**
 * What the conformance suite's isolation cases look for from inside a
 * sandbox: secret files planted on the host (one in /root, one in the
 * scratch dir), the same secret in the worker's environment, and a host
 * service listening on loopback. Planted before the suite, removed after.
 */
import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';

export interface HostBait {
  readonly secretValue: string;
  readonly secretFiles: string[];
  /** Port of the host service on 127.0.0.1 (0 until planted). */
  port(): number;
  plant(): Promise<void>;
  remove(): Promise<void>;
}

export function hostBait(name: string, scratch: string): HostBait {
  const secretValue = `secret-${randomBytes(8).toString('hex')}`;
  const secretFiles = [join('/root', `.rollout-${name}-${process.pid}`), join(scratch, 'host-secret.txt')];
  let listener: Server | undefined;
  let port = 0;
  return {
    secretValue,
    secretFiles,
    port: () => port,
    plant: async () => {
      for (const file of secretFiles) writeFileSync(file, secretValue, { mode: 0o600 });
      process.env.ROLLOUT_CONFORMANCE_SECRET = secretValue;
      const server = createServer((s) => s.end('host service\n'));
      listener = server;
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const address = server.address();
      port = typeof address === 'object' && address ? address.port : 0;
    },
    remove: async () => {
      for (const file of secretFiles) rmSync(file, { force: true });
      const server = listener;
      if (server) await new Promise((r) => server.close(r));
    },
  };
}
