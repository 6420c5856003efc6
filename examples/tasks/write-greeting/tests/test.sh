#!/bin/bash
mkdir -p /logs/verifier
expected=$'Hello, rollout!\nRewards are earned.\n'
if [ -f /app/greeting.txt ] && [ "$(cat /app/greeting.txt; printf x)" = "${expected}x" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
