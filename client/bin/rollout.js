#!/usr/bin/env node
// The `rollout` command (npm bin). Runs the TypeScript sources through tsx so
// `npx rollout` works in a checkout without a build step.
const [major] = process.versions.node.split('.').map(Number);
if (major < 22) {
  process.stderr.write(
    `rollout: needs Node.js >= 22, this is ${process.version}. ` +
      'Run `export PATH="$(bash scripts/ensure-node.sh):$PATH"` to use Node 24 from the npm registry, or install Node.js 24 LTS.\n',
  );
  process.exit(2);
}
const { register } = await import('tsx/esm/api');
register();
await import('../cli/main.ts');
