#!/usr/bin/env bash
# Prints the python3 of a CPython release built from source for harnesses that need a newer Python
# than the host's (Harbor's terminus-2 needs >= 3.12; bookworm has 3.11). The source is CPython's own
# tag as the Go module proxy serves it (github.com/python/cpython v3.X.Y+incompatible, immutable,
# sha256 pinned here as in images/cpythonSource.ts), built with the host's gcc and
# Debian's -dev packages into the cache (about 6 minutes on 2 cores, once), without PGO/LTO.
# Usage: bash scripts/ensure-harness-python.sh 3.12.14 SHA256
set -euo pipefail
cd "$(dirname "$0")/.."
version="$1"
sha256="$2"
cache="${ROLLOUT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rollout-pipeline}"
prefix="$cache/harnesses/python-$version"
if [ -x "$prefix/bin/python3" ] && [ -f "$prefix/.complete" ]; then echo "$prefix/bin/python3"; exit 0; fi
bash scripts/ensure-debian.sh gcc make libc6-dev libbz2-dev libffi-dev liblzma-dev libncurses-dev libreadline-dev libsqlite3-dev libssl-dev uuid-dev zlib1g-dev xz-utils curl ca-certificates
proxy="${ROLLOUT_GO_PROXY:-https://proxy.golang.org}"
url="${proxy%/}/github.com/python/cpython/@v/v$version+incompatible.zip"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "ensure-harness-python: CPython $version from $url, built into $prefix" >&2
curl -fsSL --retry 3 -o "$work/src.zip" "$url"
echo "$sha256  $work/src.zip" | sha256sum -c --quiet - >&2 || { echo "ensure-harness-python: $url does not have the pinned sha256 $sha256" >&2; exit 1; }
python3 - "$work/src.zip" "$work/src" "$version" <<'PY'
import os, shutil, sys, zipfile
prefix = f"github.com/python/cpython@v{sys.argv[3]}+incompatible/"
with zipfile.ZipFile(sys.argv[1]) as z:
    for info in z.infolist():
        if not info.filename.startswith(prefix) or info.is_dir():
            continue
        out = os.path.join(sys.argv[2], info.filename[len(prefix):])
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with z.open(info) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
        # Zip entries keep no mode here: configure and the build's own scripts must run.
        if info.filename.endswith(("configure", ".sh", ".py")) or "/Tools/" in info.filename or "install-sh" in info.filename:
            os.chmod(out, 0o755)
PY
rm -rf "$prefix"
(
  cd "$work/src"
  sh ./configure --prefix="$prefix" --enable-shared --with-ensurepip=install LDFLAGS="-Wl,-rpath=$prefix/lib" >"$work/configure.log" 2>&1 || { tail -n 40 "$work/configure.log" >&2; exit 1; }
  make -j "$(nproc)" >"$work/make.log" 2>&1 || { tail -n 60 "$work/make.log" >&2; exit 1; }
  make install >"$work/install.log" 2>&1 || { tail -n 60 "$work/install.log" >&2; exit 1; }
)
"$prefix/bin/python3" -c 'import ssl, sqlite3, ctypes, lzma, bz2, zlib, sys; print("ensure-harness-python: built Python", sys.version.split()[0], "with", ssl.OPENSSL_VERSION)' >&2
touch "$prefix/.complete"
echo "$prefix/bin/python3"
