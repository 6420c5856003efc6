function parseDuration(text) {
  const match = /^(\d+)h$/.exec(text);
  return match ? Number(match[1]) * 3600 : 0;
}

module.exports = { parseDuration };
