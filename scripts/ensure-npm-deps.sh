#!/usr/bin/env bash
# Runs `npm ci` when package-lock.json or the Node version changed since the
# last install (a stamp in node_modules), else nothing. Prints nothing on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp="node_modules/.rollout-lock-stamp"
lock_hash="$(sha256sum package-lock.json | cut -d' ' -f1)-$(node --version)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$lock_hash" ]; then exit 0; fi
echo "ensure-npm-deps: npm ci (package-lock.json or Node changed)" >&2
npm ci --no-audit --no-fund --loglevel=error >&2
echo "$lock_hash" > "$stamp"
