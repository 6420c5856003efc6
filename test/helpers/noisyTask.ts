/**
 * A copy of examples/tasks/write-greeting whose reference solution prints a
 * lot (60 lines of stdout, a stderr line) and prints markup a page must show
 * as text (a <script> and an <img onerror>), and whose tests print what they
 * check. What a real build log and a hostile agent's output look like to the
 * trajectory viewer.
 */
import { cpSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** Markup the solution prints; a page that runs it sets document.title to PLANTED_TITLE. */
export const PLANTED_SCRIPT = `<script>document.title='pwned'</script>`;
export const PLANTED_IMG = `<img src=x onerror="document.title='pwned'">`;
export const PLANTED_TITLE = 'pwned';

export function makeNoisyTask(parent: string): string {
  const dir = join(parent, 'noisy-greeting');
  cpSync(join(root, 'examples/tasks/write-greeting'), dir, { recursive: true });
  writeFileSync(
    join(dir, 'solution/solve.sh'),
    `#!/bin/bash
for i in $(seq 1 60); do echo "build step $i of 60"; done
echo "${PLANTED_SCRIPT.replace(/"/g, '\\"')}"
echo '${PLANTED_IMG.replace(/'/g, `'"'"'`)}'
echo "warning: greeting written without a locale" >&2
printf 'Hello, rollout!\\nRewards are earned.\\n' > /app/greeting.txt
`,
  );
  writeFileSync(
    join(dir, 'tests/test.sh'),
    `#!/bin/bash
mkdir -p /logs/verifier
expected=$'Hello, rollout!\\nRewards are earned.\\n'
echo "checking /app/greeting.txt"
if [ -f /app/greeting.txt ] && [ "$(cat /app/greeting.txt; printf x)" = "\${expected}x" ]; then
  echo "PASS greeting matches"
  echo 1 > /logs/verifier/reward.txt
else
  echo "FAIL greeting differs"
  echo 0 > /logs/verifier/reward.txt
fi
`,
  );
  return dir;
}
