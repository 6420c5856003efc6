#!/bin/bash
# Sums whatever it finds and never throws.
cat > /app/duration.js <<'JS'
function parseDuration(text) {
  let total = 0;
  for (const [, n, unit] of text.matchAll(/(\d+)([hms])/g)) total += Number(n) * { h: 3600, m: 60, s: 1 }[unit];
  return total;
}
module.exports = { parseDuration };
JS
