/**
 * The launcher of the servers' machine (see clusterMachine.ts): started through nsenter inside the
 * namespace the test made for them, it starts the production topology there (LocalTemporalCluster:
 * PostgreSQL and every Temporal service as its own process, all inheriting the namespace) and then
 * carries out the test's chaos on it, one command per line of stdin, one JSON answer per line of
 * stdout. Its argument is the cluster's options as JSON. It stops the cluster when stdin closes.
 */
import { createInterface } from 'node:readline';
import { LocalTemporalCluster, type ClusterState, type LocalClusterOptions } from '../../../cluster/localCluster.js';

export type MachineCommand =
  | { op: 'kill-service' | 'start-service'; service: string }
  | { op: 'stop-postgres' | 'start-postgres' | 'kill-postgres' | 'state' | 'destroy' };

export type MachineAnswer = { id: number; state: ClusterState } | { id: number; error: string };

const say = (message: { ready: ClusterState } | { startError: string } | MachineAnswer): void => {
  process.stdout.write(`${JSON.stringify(message)}\n`);
};

const options = JSON.parse(process.argv[2] ?? '{}') as LocalClusterOptions;
let cluster: LocalTemporalCluster;
try {
  cluster = await LocalTemporalCluster.start(options);
} catch (err) {
  say({ startError: err instanceof Error ? err.message : String(err) });
  process.exit(1);
}
say({ ready: cluster.state() });

async function carryOut(command: MachineCommand): Promise<void> {
  switch (command.op) {
    case 'kill-service':
      return cluster.service(command.service).kill();
    case 'start-service':
      return cluster.service(command.service).start();
    case 'stop-postgres':
      return cluster.postgres.stop();
    case 'start-postgres':
      return cluster.postgres.start();
    case 'kill-postgres':
      return cluster.postgres.kill();
    case 'destroy':
      return cluster.destroy();
    case 'state':
      return;
  }
}

// One command at a time, in the order they came.
let queue = Promise.resolve();
const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  const { id, command } = JSON.parse(line) as { id: number; command: MachineCommand };
  queue = queue.then(async () => {
    try {
      await carryOut(command);
      say({ id, state: cluster.state() });
      if (command.op === 'destroy') process.exit(0);
    } catch (err) {
      say({ id, error: err instanceof Error ? err.message : String(err) });
    }
  });
});
lines.on('close', () => {
  queue = queue.then(() => cluster.destroy()).finally(() => process.exit(0));
});
