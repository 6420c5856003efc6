#!/bin/bash
mkdir -p /logs/verifier
expected=$'api 3\nbilling 3\nauth 1\nworker 1\n'
if [ -f /app/errors.txt ] && [ "$(cat /app/errors.txt; printf x)" = "${expected}x" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
