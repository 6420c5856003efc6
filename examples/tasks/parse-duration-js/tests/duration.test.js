const assert = require('node:assert');
const fs = require('node:fs');

// Read before the code under test loads; printed only after the last assertion (see test.sh).
const token = fs.readFileSync('/tests/.token', 'utf8').trim();
fs.unlinkSync('/tests/.token');

const { parseDuration } = require('/app/duration.js');

const good = { '1h30m': 5400, '45s': 45, '2h': 7200, '1h2m3s': 3723, '90m': 5400, '0s': 0, '10h0m5s': 36005 };
for (const [text, seconds] of Object.entries(good)) assert.strictEqual(parseDuration(text), seconds, text);
for (const bad of ['', '5x', '1m1h', 'h', '1h1h', ' 1h', '1.5h']) assert.throws(() => parseDuration(bad), Error, JSON.stringify(bad));
console.log(`parseDuration correct: ${token}`);
