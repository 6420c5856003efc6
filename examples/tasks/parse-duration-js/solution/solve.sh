#!/bin/bash
cat > /app/duration.js <<'JS'
function parseDuration(text) {
  const match = /^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/.exec(text);
  if (!match || text === '') throw new Error(`not a duration: ${JSON.stringify(text)}`);
  const [, h = '0', m = '0', s = '0'] = match;
  return Number(h) * 3600 + Number(m) * 60 + Number(s);
}

module.exports = { parseDuration };
JS
