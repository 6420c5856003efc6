/**
 * The house's layering, checked by dependency-cruiser (`npm run layers`, part of `npm test`;
 * docs/architecture.md draws it). Rooms from the ground up; each imports only the rooms its line in
 * MAY_IMPORT names, all of them below it:
 *
 *   shared/      contract types and small pure helpers; imports nothing of ours
 *   the engine, what the activities call (and the CLI and the benches directly):
 *     sandboxes/   the sandbox providers (local, kubernetes), the helper they run, the reaper
 *     tasks/       loading a task (task.toml), its network, the cache of loaded tasks
 *     stores/      the trajectory stores (file system, PostgreSQL)
 *     policies/    the policy clients (OpenAI-compatible, token-level, scripted, adversarial) and
 *                  what a call needs: admission, sampling, generation budgets, tokens, tool-call parsing
 *     verifier/    running a task's tests in a sandbox for its reward, and failure attribution
 *     images/      the image builder: a Dockerfile task's root filesystem, the sandbox spec of a task
 *     agent/       the agent's side of a turn: its policy call (metered), its tool calls, the
 *                  conversation as stored, the pipeline's metrics
 *     harnesses/   published agent harnesses run in a jail, their model calls captured as turns
 *     resume/      an attempt's turns restored from the store by replaying its tool calls
 *   activities/  the Temporal activities (steps/, contract.ts, createActivities.ts) and their glue
 *   workflows/   deterministic workflow code: shared/, and activities/ as types only (lint enforces
 *                the type-only part, and keeps the engine out: eslint.config.js)
 *   servers/     the servers the pipeline starts as processes (Temporal dev server, inference server)
 *   workers/     worker processes (they take workflows/ by path, for the bundler, not by import)
 *   cluster/     the real Temporal cluster on PostgreSQL
 *   client/      the CLI and its commands (client/taskTools/: what `rollout task check` runs)
 *   bench/       benchmarks, on top of everything (and test/'s helpers)
 *
 * And no import circles anywhere, types included: a circle is two files that cannot be read apart.
 * Each list is what the room's code imports today: a room that needs a room above it has a piece in
 * the wrong place (move the piece down), not a rule to loosen.
 */
const ROOMS = ['shared', 'sandboxes', 'tasks', 'stores', 'policies', 'verifier', 'images', 'agent', 'harnesses', 'resume', 'activities', 'workflows', 'servers', 'workers', 'cluster', 'client', 'bench'];

/** What each room may import besides itself. */
const MAY_IMPORT = {
  shared: [],
  sandboxes: ['shared'],
  tasks: ['shared'],
  stores: ['shared'],
  policies: ['shared'],
  verifier: ['shared', 'sandboxes'],
  images: ['shared', 'sandboxes', 'tasks', 'verifier'],
  agent: ['shared', 'policies', 'stores'],
  harnesses: ['shared', 'policies', 'stores', 'agent'],
  resume: ['shared', 'policies', 'stores', 'agent'],
  activities: ['shared', 'sandboxes', 'tasks', 'stores', 'policies', 'verifier', 'images', 'agent', 'harnesses', 'resume'],
  workflows: ['shared', 'activities'],
  servers: ['shared'],
  workers: ['shared', 'sandboxes', 'stores', 'agent', 'activities'],
  cluster: ['shared', 'servers', 'workers'],
  client: ['shared', 'sandboxes', 'tasks', 'stores', 'policies', 'verifier', 'images', 'agent', 'resume', 'activities', 'workflows', 'servers', 'workers', 'cluster'],
  bench: ['shared', 'sandboxes', 'tasks', 'stores', 'policies', 'verifier', 'images', 'agent', 'resume', 'activities', 'servers', 'workers', 'cluster', 'client', 'test'],
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
