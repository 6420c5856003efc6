#!/usr/bin/env bash
# Prints the path of the local sandbox provider's compiled helper (one program start per exec and per
# launch instead of a chain of shell, nsenter, setpriv, prlimit, unshare and mount; see
# sandboxes/local/helper/sandbox-helper.c), building it once with Debian's gcc and libc
# (static, nothing downloaded). Cached outside the repository, keyed by the sources' sha256, so a
# changed source builds a new one and an unchanged one is never rebuilt. Export it as
# ROLLOUT_EXEC_HELPER; without it the provider runs the program chain and says so once in its log.
set -euo pipefail
cd "$(dirname "$0")/.."

# The helper's modes (exec, launch, beside), the sandbox init it also is (sandbox-init.c) and what
# both use (common.c). The cache key is the sha256 of every source, headers included.
HELPER=sandboxes/local/helper
SOURCES=("$HELPER/sandbox-helper.c" "$HELPER/sandbox-init.c" "$HELPER/sandbox-init.h" "$HELPER/common.c" "$HELPER/common.h")
COMPILE=("$HELPER/sandbox-helper.c" "$HELPER/sandbox-init.c" "$HELPER/common.c")
CACHE_ROOT="${ROLLOUT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rollout-pipeline}"
key="$(cat "${SOURCES[@]}" | sha256sum | cut -c1-16)"
target_dir="$CACHE_ROOT/sandbox-helper-$key"
target="$target_dir/rollout-sandbox-helper"

if [ -x "$target" ] && "$target" --version >/dev/null 2>&1; then
  echo "$target"
  exit 0
fi
if ! command -v gcc >/dev/null 2>&1 || [ ! -e /usr/include/stdio.h ]; then
  bash scripts/ensure-debian.sh gcc libc6-dev >&2
fi
mkdir -p "$target_dir"
tmp="$(mktemp "$target_dir/build.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
# Static: no dynamic loader at each start (it is on every exec's path).
if ! gcc -O2 -Wall -Wextra -Werror -static -o "$tmp" "${COMPILE[@]}" >&2; then
  echo "ensure-exec-helper: static link failed; building it dynamically linked" >&2
  gcc -O2 -Wall -Wextra -Werror -o "$tmp" "${COMPILE[@]}" >&2
fi
chmod 0755 "$tmp"
mv -f "$tmp" "$target"
trap - EXIT
echo "ensure-exec-helper: built $target from ${COMPILE[*]} (sha256 $key...)" >&2
echo "$target"
