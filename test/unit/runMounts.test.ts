import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { parseDockerfile } from '../../images/dockerfile.js';
import { checkRunMounts } from '../../images/runMounts.js';
import { ClassifiedError, failureName } from '../../shared/failures.js';

const context = mkdtempSync(join(tmpdir(), 'run-mounts-'));
mkdirSync(join(context, 'src/real'), { recursive: true });
symlinkSync('/', join(context, 'hostroot'));
symlinkSync('/etc', join(context, 'src/etc'));
after(() => rmSync(context, { recursive: true, force: true }));

function check(dockerfile: string): void {
  const parsed = parseDockerfile(`FROM python:3.13-slim-bookworm\n${dockerfile}\n`, 'environment/Dockerfile');
  checkRunMounts(parsed.instructions, (i) => `environment/Dockerfile:${parsed.lineOf[i] ?? '?'}`, context);
}

function refused(dockerfile: string, why: RegExp): void {
  let err: unknown;
  try {
    check(dockerfile);
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof ClassifiedError, `refused: ${dockerfile}`);
  assert.equal(failureName(err), 'task/invalid_spec');
  assert.match(err.message, /environment\/Dockerfile:2: --mount=/);
  assert.match(err.message, why);
  assert.match(err.message, /Fix: /);
}

test('mounts that reach the host through buildah 1.28 are refused, each naming the line, the hole and the fix', () => {
  refused('RUN --mount=type=cache,id=../../../..,target=/h ls /h', /CVE-2024-9675/);
  refused('RUN --mount=type=cache,id=/etc,target=/h ls /h', /CVE-2024-9675/);
  refused('RUN --mount=type=cache,id=a/../../b,target=/h ls /h', /CVE-2024-9675/);
  refused('RUN --mount=type=bind,source=hostroot,target=/h ls /h', /symbolic link .*hostroot.*CVE-2024-1753/);
  refused('RUN --mount=source=src/etc/ssl,target=/h ls /h', /symbolic link .*src\/etc/);
  refused('RUN --mount=type=bind,from=evil,source=/link,target=/h ls /h', /from another image or stage/);
  refused('RUN --mount=type=cache,from=evil,target=/h ls /h', /from another image or stage/);
  refused('RUN --mount=type=bind,source=src/real,target=/h,rw touch /h/x', /writable bind mount/);
  refused('RUN --mount=type=cache,id=$CACHE,target=/h ls', /build argument/);
  refused('RUN --network=none --mount=type=cache,id=../x,target=/h \\\n  ls /h', /CVE-2024-9675/);
});

test('ordinary mounts and commands that only mention mounts pass', () => {
  check('RUN --mount=type=cache,target=/root/.cache/pip pip install requests');
  check('RUN --mount=type=cache,id=pip-cache,target=/root/.cache/pip pip install requests');
  check('RUN --mount=type=bind,source=src/real,target=/src make -C /src');
  check('RUN --mount=type=tmpfs,target=/scratch true');
  check('RUN --mount=type=secret,id=token cat /run/secrets/token');
  // Words of the command are the command's, not mount flags.
  check('RUN echo --mount=type=cache,id=../../..,target=/h');
  check('COPY --from=builder /out /out');
});
