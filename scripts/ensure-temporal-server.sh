#!/usr/bin/env bash
# Prints the directory holding the real Temporal server, building it once from Go modules if needed:
#   temporal-server    go.temporal.io/server/cmd/server     (every service: frontend, history,
#                                                            matching, worker; one per process)
#   temporal-sql-tool  go.temporal.io/server/cmd/tools/sql  (creates the database and applies the
#                                                            PostgreSQL schemas embedded in it)
# This is the server production runs (deploy/temporal-helm-values.yaml), unlike the CLI's
# `temporal server start-dev` (one process, SQLite) that the embedded default uses.
#
# Order: TEMPORAL_SERVER_DIR (must hold both binaries), the copy cached outside the repository
# by version, else build into that cache. v1.31.2 has no replace directives, so `go install`
# from the Go module proxy works; a cold build takes 6-8 minutes on 2 cores.
#
# Usage: TEMPORAL_SERVER_DIR="$(bash scripts/ensure-temporal-server.sh)"   # builds if missing
#        bash scripts/ensure-temporal-server.sh --no-build || skip          # exit 1 when not built
# Env:   ROLLOUT_CACHE_DIR, TEMPORAL_SERVER_DIR, TEMPORAL_SERVER_BUILD_JOBS (go build -p, default 2).
# Only this set-up step fetches anything (Go modules); nothing at run time does.
set -euo pipefail

SERVER_VERSION="1.31.2"
CACHE_ROOT="${ROLLOUT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rollout-pipeline}"
TARGET_DIR="$CACHE_ROOT/temporal-server-v$SERVER_VERSION"
STAMP_TEXT="temporal-server=v$SERVER_VERSION"

no_build=0
case "${1:-}" in
  "") ;;
  --no-build) no_build=1 ;;
  *) echo "usage: $0 [--no-build]" >&2; exit 2 ;;
esac

has_binaries() { [ -x "$1/temporal-server" ] && [ -x "$1/temporal-sql-tool" ]; }
cached() { has_binaries "$1" && [ "$(cat "$1/.complete" 2>/dev/null)" = "$STAMP_TEXT" ]; }

if [ -n "${TEMPORAL_SERVER_DIR:-}" ]; then
  if has_binaries "$TEMPORAL_SERVER_DIR"; then echo "$TEMPORAL_SERVER_DIR"; exit 0; fi
  echo "ensure-temporal-server: TEMPORAL_SERVER_DIR=$TEMPORAL_SERVER_DIR lacks temporal-server or temporal-sql-tool; unset it or fix the path." >&2
  exit 1
fi
if cached "$TARGET_DIR"; then echo "$TARGET_DIR"; exit 0; fi
if [ "$no_build" = 1 ]; then
  echo "ensure-temporal-server: no Temporal server in $TARGET_DIR (run scripts/ensure-temporal-server.sh to build it)" >&2
  exit 1
fi
if ! command -v go >/dev/null 2>&1; then
  echo "ensure-temporal-server: no Temporal server found and no Go toolchain to build it." >&2
  echo "  Install Go >= 1.24 (https://go.dev/dl) and rerun, or point TEMPORAL_SERVER_DIR at a directory with temporal-server and temporal-sql-tool." >&2
  exit 1
fi

mkdir -p "$CACHE_ROOT"
# One build at a time per cache (parallel test runs would otherwise each start one).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE_ROOT/temporal-server-v$SERVER_VERSION.lock"
  flock 9
  if cached "$TARGET_DIR"; then echo "$TARGET_DIR"; exit 0; fi
fi

jobs="${TEMPORAL_SERVER_BUILD_JOBS:-2}"
echo "ensure-temporal-server: building the Temporal server v$SERVER_VERSION from Go modules into $TARGET_DIR (once per machine; 6-8 minutes cold)" >&2
staging="$(mktemp -d "$CACHE_ROOT/temporal-server-build.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
started=$SECONDS
# Built outside the repository (its go.mod must not affect it), at low priority.
(cd "$staging" && GOBIN="$staging/bin" CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -p=$jobs -trimpath" nice -n 19 \
  go install -ldflags "-s -w" \
  "go.temporal.io/server/cmd/server@v$SERVER_VERSION" \
  "go.temporal.io/server/cmd/tools/sql@v$SERVER_VERSION") >&2
mv "$staging/bin/server" "$staging/bin/temporal-server"
mv "$staging/bin/sql" "$staging/bin/temporal-sql-tool"

check_runs() { # binary, text its --version output must contain
  local out; out="$("$staging/bin/$1" --version 2>&1 || true)"
  case "$out" in *"$2"*) ;; *) echo "ensure-temporal-server: the built $1 does not run: $out" >&2; exit 1 ;; esac
}
check_runs temporal-server "$SERVER_VERSION"
check_runs temporal-sql-tool "$SERVER_VERSION"

mkdir -p "$TARGET_DIR"
mv -f "$staging/bin/temporal-server" "$staging/bin/temporal-sql-tool" "$TARGET_DIR/"
echo "$STAMP_TEXT" >"$TARGET_DIR/.complete"
echo "ensure-temporal-server: done in $((SECONDS - started))s" >&2
echo "$TARGET_DIR"
