/**
 * The house's layering, checked by dependency-cruiser (`npm run layers`, part of `npm test`;
 * docs/architecture.md draws it). Rooms from the ground up, each importing only the ones below it:
 *
 *   shared/      contract types and small pure helpers; imports nothing of ours
 *   sandboxes/   the sandbox providers (local, kubernetes), the helper they run, the reaper
 *   tasks/       loading a task (task.toml), its network, the cache of loaded tasks
 *   stores/      the trajectory stores (file system, PostgreSQL)
 *   verifier/    running a task's tests in a sandbox for its reward, and failure attribution
 *   images/      the image builder: a Dockerfile task's root filesystem, the sandbox spec of a task
 *   policies/    the policy clients (OpenAI-compatible, token-level, scripted, adversarial) and
 *                what a call needs: admission, sampling, generation budgets, tokens, tool-call parsing
 *   agent/       the agent's side of a turn: its policy call (metered), its tool calls, the
 *                conversation as stored, the pipeline's metrics
 *   harnesses/   published agent harnesses run in a jail, their model calls captured as turns
 *   resume/      an attempt's turns restored from the store by replaying its tool calls
 *   activities/  the engine and its Temporal activities (sandboxes, policies, tasks, stores, images)
 *   workflows/   deterministic workflow code: shared/, and activities/ as types only (lint enforces
 *                the type-only part: eslint.config.js)
 *   workers/     worker processes
 *   servers/     the servers the pipeline starts as processes (Temporal dev server, inference server)
 *   cluster/     the real Temporal cluster on PostgreSQL
 *   client/      the CLI and its commands
 *   bench/       benchmarks, on top of everything (and test/'s helpers)
 *
 * And no import circles anywhere, types included: a circle is two files that cannot be read apart.
 */
const ROOMS = ['shared', 'activities', 'sandboxes', 'tasks', 'verifier', 'images', 'policies', 'agent', 'harnesses', 'resume', 'stores', 'workflows', 'workers', 'servers', 'cluster', 'client', 'bench'];

/** What each room may import besides itself. */
const MAY_IMPORT = {
  shared: [],
  sandboxes: ['shared'],
  tasks: ['shared'],
  stores: ['shared'],
  verifier: ['shared', 'sandboxes'],
  images: ['shared', 'sandboxes', 'tasks', 'verifier'],
  policies: ['shared'],
  agent: ['shared', 'policies', 'stores'],
  harnesses: ['shared', 'policies', 'stores', 'agent'],
  resume: ['shared', 'policies', 'stores', 'agent'],
  activities: ['shared', 'sandboxes', 'tasks', 'stores', 'verifier', 'images', 'policies', 'agent', 'harnesses', 'resume'],
  workflows: ['shared', 'activities'],
  workers: ['shared', 'activities', 'workflows', 'sandboxes', 'stores', 'agent'],
  servers: ['shared'],
  cluster: ['shared', 'servers', 'workers'],
  client: ['shared', 'sandboxes', 'tasks', 'stores', 'verifier', 'images', 'policies', 'agent', 'harnesses', 'resume', 'activities', 'workflows', 'workers', 'servers', 'cluster'],
  bench: ['shared', 'sandboxes', 'tasks', 'stores', 'verifier', 'images', 'policies', 'agent', 'harnesses', 'resume', 'activities', 'workflows', 'workers', 'servers', 'cluster', 'client', 'test'],
};

const layerRules = Object.entries(MAY_IMPORT).map(([room, allowed]) => ({
  name: `layers-${room}`,
  comment: `${room}/ may import only ${allowed.length ? allowed.map((r) => `${r}/`).join(', ') : 'nothing of ours'} (see .dependency-cruiser.cjs and docs/architecture.md)`,
  severity: 'error',
  from: { path: `^${room}/` },
  to: { path: '^(?!node_modules/)[^/]+/', pathNot: [`^(${[room, ...allowed].join('|')})/`, '^node_modules/'] },
}));

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'files that import each other in a loop (types count: the loop is there for a reader)',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    ...layerRules,
  ],
  options: {
    includeOnly: `^(${ROOMS.join('|')}|test)/`,
    exclude: { path: '(^|/)node_modules/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
