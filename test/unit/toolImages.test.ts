/**
 * `COPY --from=<image>` in a task's Dockerfile: which lines name a tool image (not an earlier
 * stage), how they are rewritten to the stand-in made here, and the error for one no rule makes.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseDockerfile, rewriteFroms } from '../../images/dockerfile.js';
import { imageTools } from '../../images/imageTools.js';
import { ensureToolImage } from '../../images/toolImages.js';

const DOCKERFILE = `FROM ubuntu:24.04 as build
COPY --from=ghcr.io/astral-sh/uv:0.8.14 /uv /uvx /bin/
RUN make
FROM ubuntu:24.04 AS target
COPY --from=ghcr.io/astral-sh/uv:0.8.14 /uv /uvx /bin/
COPY --from=build /app/documents /app/documents
COPY --from=0 /etc/os-release /tmp/
COPY start.txt /app/`;

describe('COPY --from a tool image', () => {
  test('only images are collected, not stage names or indexes, and only their --from is rewritten', () => {
    const parsed = parseDockerfile(DOCKERFILE, 'environment/Dockerfile');
    assert.deepEqual(
      parsed.copyFroms.map((c) => [c.image, c.where]),
      [
        ['ghcr.io/astral-sh/uv:0.8.14', 'environment/Dockerfile:2: COPY --from=ghcr.io/astral-sh/uv:0.8.14 /uv /uvx /bin/'],
        ['ghcr.io/astral-sh/uv:0.8.14', 'environment/Dockerfile:5: COPY --from=ghcr.io/astral-sh/uv:0.8.14 /uv /uvx /bin/'],
      ],
    );
    const out = rewriteFroms(parsed, ['localhost/base:1', 'localhost/base:1'], ['localhost/rollout-tool/uv:0.8.14', 'localhost/rollout-tool/uv:0.8.14']).split('\n');
    assert.deepEqual(out, [
      'FROM localhost/base:1 AS build',
      'COPY --from=localhost/rollout-tool/uv:0.8.14 /uv /uvx /bin/',
      'RUN make',
      'FROM localhost/base:1 AS target',
      'COPY --from=localhost/rollout-tool/uv:0.8.14 /uv /uvx /bin/',
      'COPY --from=build /app/documents /app/documents',
      'COPY --from=0 /etc/os-release /tmp/',
      'COPY start.txt /app/',
    ]);
  });

  test('a tool image no rule makes is task/invalid_spec naming the line, what is known and the fix', async () => {
    await assert.rejects(
      ensureToolImage(imageTools(), 'ghcr.io/example/tool:1.2', 'tasks/x/environment/Dockerfile:3: COPY --from=ghcr.io/example/tool:1.2 /tool /bin/'),
      (err: Error) =>
        err.name === 'task/invalid_spec' &&
        /Dockerfile:3: COPY --from=ghcr\.io\/example\/tool:1\.2 \/tool \/bin\/: the image ghcr\.io\/example\/tool:1\.2 cannot be pulled here/.test(err.message) &&
        /known: ghcr\.io\/astral-sh\/uv:<version>/.test(err.message) &&
        /Fix: install the tool in a RUN step/.test(err.message),
    );
  });
});
