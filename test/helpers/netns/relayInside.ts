/**
 * Runs inside a test-made network namespace (started through nsenter): for each
 * `ip:port=unixPath` argument, listens on ip:port on the namespace's loopback and forwards every
 * connection to the Unix socket, which the test process serves outside the namespace and
 * forwards on to the real address. Unix sockets cross network namespaces (they live in the
 * filesystem), so the namespace needs no link, bridge or route, and nothing is created on the
 * host's network. Prints `ready` once every listener is up.
 */
import { connect, createServer } from 'node:net';

const specs = process.argv.slice(2).map((arg) => {
  const m = /^([\d.]+):(\d+)=(.+)$/.exec(arg);
  if (!m) throw new Error(`relay spec ${arg}: expected ip:port=/path/to.sock`);
  return { ip: m[1] as string, port: Number(m[2]), path: m[3] as string };
});

await Promise.all(
  specs.map(
    (spec) =>
      new Promise<void>((resolve, reject) => {
        const server = createServer((inbound) => {
          const outbound = connect(spec.path);
          inbound.pipe(outbound);
          outbound.pipe(inbound);
          const close = (): void => {
            inbound.destroy();
            outbound.destroy();
          };
          inbound.on('error', close).on('close', close);
          outbound.on('error', close).on('close', close);
        });
        server.once('error', reject);
        server.listen(spec.port, spec.ip, () => resolve());
      }),
  ),
);
process.stdout.write('ready\n');
