#!/usr/bin/env bash
# Installs the named Debian packages that are missing (needs root), idempotently:
# prints nothing on stdout, what it installs on stderr.
#
# Usage: bash scripts/ensure-debian.sh bubblewrap util-linux ...
set -euo pipefail
if [ "$#" -eq 0 ]; then echo "usage: $0 PACKAGE..." >&2; exit 2; fi
if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "ensure-debian: no dpkg on this machine; install these packages with its package manager: $*" >&2
  exit 0
fi
missing=()
for pkg in "$@"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "ensure-debian: missing Debian packages: ${missing[*]}; install them with: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "ensure-debian: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq -o DPkg::Lock::Timeout=600 >&2
apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}" >&2
