"""Starts a harness adapter inside its jail (harnesses/harnessJail.ts).

The jail has a network namespace of its own with only a loopback interface: nothing of the
host (the Temporal frontend, the inference server, a cluster's PostgreSQL) is reachable. The
one way out is the capture endpoint, which the worker serves on a unix socket in the run's
scratch directory; this launcher relays 127.0.0.1:<port> inside the jail to that socket, then
runs the adapter module as ``python -m`` would, in this same process.

    python -m harness_bridge.jailed PORT SOCKET MODULE [ARGS...]
"""

import runpy
import socket
import sys
import threading


def _pump(source: socket.socket, sink: socket.socket, done: threading.Semaphore) -> None:
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        done.release()


def _relay(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    done = threading.Semaphore(0)
    threading.Thread(target=_pump, args=(client, upstream, done), daemon=True).start()
    threading.Thread(target=_pump, args=(upstream, client, done), daemon=True).start()
    done.acquire()
    done.acquire()
    client.close()
    upstream.close()


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_relay, args=(client, path), daemon=True).start()


def main() -> None:
    if len(sys.argv) < 4:
        sys.exit("usage: python -m harness_bridge.jailed PORT SOCKET MODULE [ARGS...]")
    port, path, module = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
    sys.argv = [module, *sys.argv[4:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
