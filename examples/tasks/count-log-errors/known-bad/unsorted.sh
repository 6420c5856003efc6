#!/bin/bash
# Right counts, alphabetical order only.
cd /app/logs
for f in *.log; do
  n=$(grep -c '^ERROR ' "$f")
  [ "$n" -gt 0 ] && echo "${f%.log} $n"
done > /app/errors.txt
