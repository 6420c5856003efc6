#!/bin/bash
# The pass is recorded only when the test's last line carries a token made here, which the test
# reads (and removes) before it loads the code under test and prints only after its last
# assertion: code that ends the test process early with success (os._exit(0) at import) never
# prints it, whatever exit status it leaves. The exit status alone decides nothing.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
printf '%s' "$token" > /tests/.token
out=$(python3 /tests/test_stats.py 2>&1)
printf '%s\n' "$out"
if [ "$(printf '%s\n' "$out" | tail -n 1)" = "all median cases pass: $token" ]; then echo 1 > /logs/verifier/reward.txt; fi
