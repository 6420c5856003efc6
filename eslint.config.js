// ESLint flat config: typescript-eslint with type information everywhere, and
// the workflow sandbox rules for every file under a `workflows/` folder.
import { builtinModules } from 'node:module';
import tseslint from 'typescript-eslint';

const nodeBuiltins = [...new Set(builtinModules.map((m) => m.replace(/^node:/, '')))];

/** The engine's rooms (.dependency-cruiser.cjs): what the activities call, out of a workflow's reach. */
const engineRooms = ['sandboxes', 'tasks', 'stores', 'policies', 'verifier', 'images', 'agent', 'harnesses', 'resume'];

/** Workflow code runs in Temporal's deterministic sandbox: no Node built-ins, no activity code, no engine. */
const workflowSandboxRules = {
  '@typescript-eslint/no-restricted-imports': [
    'error',
    {
      paths: nodeBuiltins.map((name) => ({
        name,
        message: 'Workflow code runs in a deterministic sandbox: no Node built-ins. Do this in an activity.',
      })),
      patterns: [
        {
          group: ['node:*'],
          message: 'Workflow code runs in a deterministic sandbox: no Node built-ins. Do this in an activity.',
        },
        {
          group: ['**/activities', '**/activities/**'],
          allowTypeImports: true,
          message: 'Workflows import activities as types only (`import type`) and call them through proxyActivities.',
        },
        {
          group: engineRooms.flatMap((room) => [`**/${room}`, `**/${room}/**`]),
          message: 'Workflow code may not import the engine (sandboxes/, tasks/, stores/, policies/, verifier/, images/, agent/, harnesses/, resume/), not even its types: it reaches the engine through activities, whose types are in activities/contract.ts.',
        },
        {
          group: ['**/workers/**', '**/servers/**', '**/cluster/**', '**/client/**'],
          allowTypeImports: true,
          message: 'Workflow code may not import worker, server, cluster or client code; only shared/ and @temporalio/workflow.',
        },
      ],
    },
  ],
};

export default tseslint.config(
  // examples/ holds task content (what agents edit inside sandboxes), not project code.
  { ignores: ['node_modules/**', 'test-output/**', 'test/fixtures/lint-violations/**', 'client/bin/**', 'examples/**', 'eslint.config.js', '.dependency-cruiser.cjs'] },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: true,
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        // node:test's test()/describe() return promises the runner itself awaits.
        { allowForKnownSafeCalls: [{ from: 'package', name: ['test', 'it', 'describe', 'suite'], package: 'node:test' }] },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      // Activity and provider interfaces are async by contract even where one implementation needs no await.
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['**/workflows/**/*.ts'],
    rules: workflowSandboxRules,
  },
  {
    // Lines a person reads without scrolling, outside tests: code up to 200 characters (a long message
    // string, template or regular expression may run on; tests keep their long descriptive names).
    files: ['*/**/*.ts'],
    ignores: ['test/**'],
    rules: { 'max-len': ['error', { code: 200, ignoreStrings: true, ignoreTemplateLiterals: true, ignoreRegExpLiterals: true, ignoreUrls: true }] },
  },
  {
    files: ['test/fixtures/lint-violations/longLine.ts'],
    rules: { 'max-len': ['error', { code: 200, ignoreStrings: true, ignoreTemplateLiterals: true, ignoreRegExpLiterals: true, ignoreUrls: true }] },
  },
);
