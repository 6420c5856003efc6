#!/bin/bash
# Counts "ERRORS" lines too.
cd /app/logs
for f in *.log; do
  n=$(grep -c '^ERROR' "$f")
  [ "$n" -gt 0 ] && echo "${f%.log} $n"
done | sort -k2,2nr -k1,1 > /app/errors.txt
