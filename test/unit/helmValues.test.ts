/**
 * deploy/temporal-helm-values.yaml against the cluster the chaos suite tests (cluster/): the
 * Temporal cluster an operator installs with those values must be the one that was shown to keep
 * batches running: the same server version, the same persistence and visibility stores, the same
 * dynamic config, our search attributes, more than one shard, and no service with a single replica
 * (the chaos suite's history case, broken on purpose with one history process, never finishes).
 *
 * The chart itself is not available offline, so `helm template` is not run here; the values file
 * names the chart version it was rendered against.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadYaml } from '@kubernetes/client-node';
import { dynamicConfig, PERSISTENCE_DATABASE, serviceConfig, TEMPORAL_SERVICES, VISIBILITY_DATABASE } from '../../cluster/serviceConfig.js';
import { TEMPORAL_SERVER_VERSION } from '../../cluster/temporalServerBinary.js';
import { ROLLOUT_SEARCH_ATTRIBUTES } from '../../shared/searchAttributes.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const valuesFile = join(root, 'deploy/temporal-helm-values.yaml');
const values = loadYaml<Record<string, unknown>>(readFileSync(valuesFile, 'utf8'));

/** The value at a dotted path of the values file, or a failure that names the path. */
function at(path: string): unknown {
  let node: unknown = values;
  for (const key of path.split('.')) {
    if (typeof node !== 'object' || node === null || !(key in node)) assert.fail(`deploy/temporal-helm-values.yaml has no ${path}`);
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

/** One process's configuration as cluster/ writes it (the address does not matter here). */
const tested = serviceConfig({
  process: { service: 'history', ip: '127.0.0.1', grpcPort: 7234, membershipPort: 6934, metricsPort: 8000 },
  peers: [],
  database: { host: '127.0.0.1', port: 5432, user: 'temporal', password: 'from-a-secret' },
  historyShards: 8,
  frontendAddress: '127.0.0.1:7233',
  dynamicConfigFile: '/dev/null',
}) as { persistence: { datastores: Record<string, { sql: { pluginName: string; databaseName: string } }>; defaultStore: string; visibilityStore: string } };

describe('deploy/temporal-helm-values.yaml is the cluster the chaos suite tests', () => {
  test('the same server version: the image tags are the version cluster/ builds and runs', () => {
    assert.equal(at('server.image.tag'), TEMPORAL_SERVER_VERSION, 'server.image.tag');
    assert.equal(at('admintools.image.tag'), TEMPORAL_SERVER_VERSION, 'admintools.image.tag (the CLI the jobs run)');
  });

  test('persistence and visibility on PostgreSQL through the same plugin and databases', () => {
    const stores = at('server.config.persistence.datastores') as Record<string, { sql?: { pluginName?: string; databaseName?: string } }>;
    const deployed = (name: string) => stores[at(`server.config.persistence.${name}`) as string]?.sql;
    const ran = (name: 'defaultStore' | 'visibilityStore') => tested.persistence.datastores[tested.persistence[name]]?.sql;
    for (const store of ['defaultStore', 'visibilityStore'] as const) {
      assert.equal(deployed(store)?.pluginName, ran(store)?.pluginName, `${store}: SQL plugin`);
      assert.equal(deployed(store)?.databaseName, ran(store)?.databaseName, `${store}: database`);
    }
    assert.deepEqual([ran('defaultStore')?.databaseName, ran('visibilityStore')?.databaseName], [PERSISTENCE_DATABASE, VISIBILITY_DATABASE]);
  });

  test('the same dynamic config', () => {
    assert.deepEqual(at('server.dynamicConfig'), dynamicConfig());
  });

  test('more than one history shard, and no Temporal service with a single replica', () => {
    const shards = at('server.config.persistence.numHistoryShards') as number;
    assert.ok(Number.isInteger(shards) && shards > 1, `numHistoryShards ${shards}: shards move between history replicas only when there are several`);
    const global = at('server.replicaCount') as number;
    for (const service of TEMPORAL_SERVICES) {
      const own = ((values.server as Record<string, { replicaCount?: number } | undefined>)[service] ?? {}).replicaCount;
      assert.ok((own ?? global) >= 2, `${service}: ${own ?? global} replica(s); one is a single point of failure`);
    }
  });

  test("the namespace the workers use is created, and the job registers exactly our search attributes with their types", () => {
    const created = (at('server.config.namespaces.namespace') as { name: string }[]).map((n) => n.name);
    assert.ok(created.includes('default'), `namespaces created: ${created.join(', ')}`);
    // The job is a template; its Helm expressions do not matter to what it registers.
    const jobs = (at('extraObjects') as string[]).map((text) => loadYaml<{ kind: string; spec: { template: { spec: { containers: { command: string[] }[] } } } }>(text.replace(/\{\{[^}]*\}\}/g, 'x')));
    const job = jobs.find((j) => j.kind === 'Job') ?? assert.fail('no Job in extraObjects');
    const command = job.spec.template.spec.containers[0]?.command ?? [];
    const registered: Record<string, string> = {};
    for (let i = 0; i < command.length; i++) if (command[i] === '--name') registered[command[i + 1] as string] = (command[i + 3] as string).toUpperCase();
    const ours = Object.fromEntries(ROLLOUT_SEARCH_ATTRIBUTES.map((k) => [k.name, k.type.toUpperCase()]));
    assert.deepEqual(registered, ours);
  });
});
