/**
 * Runs inside a test-made network namespace (started through nsenter): for each `listen=connect`
 * argument, listens on `listen` and forwards every connection to `connect`, where each side is an
 * `ip:port` of this namespace or the path of a Unix socket. Unix sockets cross network namespaces
 * (they live in the filesystem), so two namespaces reach each other with no link, bridge or route:
 * a worker host listens on the frontend's ip:port and forwards to a socket (`ip:port=/path`); the
 * servers' namespace serves that socket and forwards to the real frontend (`/path=ip:port`).
 * Nothing is created on the host's network. Prints `ready` once every listener is up.
 */
import { rmSync } from 'node:fs';
import { connect, createServer, type NetConnectOpts } from 'node:net';

type Endpoint = { path: string } | { host: string; port: number };

function endpoint(text: string, arg: string): Endpoint {
  if (text.startsWith('/')) return { path: text };
  const m = /^([\d.]+):(\d+)$/.exec(text);
  if (!m) throw new Error(`relay spec ${arg}: each side is ip:port or /path/to.sock, not ${text}`);
  return { host: m[1] as string, port: Number(m[2]) };
}

const specs = process.argv.slice(2).map((arg) => {
  const [listen = '', target = ''] = arg.split('=');
  return { listen: endpoint(listen, arg), target: endpoint(target, arg) };
});

await Promise.all(
  specs.map(
    (spec) =>
      new Promise<void>((resolve, reject) => {
        const server = createServer((inbound) => {
          const outbound = connect(spec.target as NetConnectOpts);
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
        if ('path' in spec.listen) {
          rmSync(spec.listen.path, { force: true });
          server.listen(spec.listen.path, () => resolve());
        } else {
          server.listen(spec.listen.port, spec.listen.host, () => resolve());
        }
      }),
  ),
);
process.stdout.write('ready\n');
