#!/usr/bin/env bash
# Runs a command with what one purpose needs set up first (scripts/setup.sh):
#   bash scripts/with-env.sh npm run demo              # purpose run (default): demo, rollout run/worker
#   bash scripts/with-env.sh --for test npm test       # everything the tests need
set -euo pipefail
cd "$(dirname "$0")/.."
purpose=run
if [ "${1:-}" = "--for" ]; then
  purpose="${2:?--for needs a purpose: run, model, test or cluster}"
  shift 2
fi
if [ "$#" -eq 0 ]; then
  echo "usage: bash scripts/with-env.sh [--for run|model|test|cluster] <command> [args...]   e.g. bash scripts/with-env.sh --for test npm test" >&2
  exit 2
fi
env_lines="$(bash scripts/setup.sh "$purpose")"
eval "$env_lines"
exec "$@"
