#!/usr/bin/env bash
# Runs a command with everything rollout-pipeline needs set up first
# (scripts/setup.sh): `bash scripts/with-env.sh npm test`.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$#" -eq 0 ]; then
  echo "usage: bash scripts/with-env.sh <command> [args...]   e.g. bash scripts/with-env.sh npm test" >&2
  exit 2
fi
env_lines="$(bash scripts/setup.sh)"
eval "$env_lines"
exec "$@"
