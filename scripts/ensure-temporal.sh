#!/usr/bin/env bash
# Prints the path of a working `temporal` CLI, building it once if needed.
#
# Order: TEMPORAL_CLI_PATH, a `temporal` on PATH (e.g. brew install temporal),
# the copy cached outside the repository, else build the official CLI from Go
# modules into that cache:
#   go install github.com/temporalio/cli/cmd/temporal@v1.5.1
# (that release's go.mod has no replace directives, so `go install` works).
# Only this set-up step fetches anything (Go modules); nothing at run time does.
set -euo pipefail

VERSION="1.5.1"
CACHE_ROOT="${ROLLOUT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rollout-pipeline}"
TARGET_DIR="$CACHE_ROOT/temporal-v$VERSION"

works() { "$1" --version 2>/dev/null | grep -q '^temporal version '; }

if [ -n "${TEMPORAL_CLI_PATH:-}" ]; then
  if works "$TEMPORAL_CLI_PATH"; then echo "$TEMPORAL_CLI_PATH"; exit 0; fi
  echo "ensure-temporal: TEMPORAL_CLI_PATH=$TEMPORAL_CLI_PATH is not a working Temporal CLI; unset it or fix the path." >&2
  exit 1
fi
if command -v temporal >/dev/null 2>&1 && works "$(command -v temporal)"; then
  command -v temporal
  exit 0
fi
if [ -x "$TARGET_DIR/temporal" ] && works "$TARGET_DIR/temporal"; then
  echo "$TARGET_DIR/temporal"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "ensure-temporal: no Temporal CLI found and no Go toolchain to build one." >&2
  echo "  Install Go (apt-get install golang-go, or https://go.dev/dl) and rerun, or install the Temporal CLI (brew install temporal) and put it on PATH." >&2
  exit 1
fi

echo "ensure-temporal: building Temporal CLI v$VERSION from Go modules into $TARGET_DIR (once per machine; takes minutes)" >&2
mkdir -p "$TARGET_DIR"
staging="$(mktemp -d "$CACHE_ROOT/temporal-build.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
# Build outside any module so the repository's files do not affect it.
(cd "$staging" && GOBIN="$staging/bin" go install -ldflags "-X github.com/temporalio/cli/temporalcli.Version=$VERSION" "github.com/temporalio/cli/cmd/temporal@v$VERSION") >&2
works "$staging/bin/temporal" || { echo "ensure-temporal: the built binary does not run" >&2; exit 1; }
mv -f "$staging/bin/temporal" "$TARGET_DIR/temporal"
echo "$TARGET_DIR/temporal"
