#!/bin/bash
python3 - <<'PY'
import configparser, json, re
parser = configparser.ConfigParser(comment_prefixes=(";", "#"), interpolation=None)
parser.read("/app/config.ini")
def typed(value):
    value = value.strip()
    if re.fullmatch(r"-?\d+", value):
        return int(value)
    if value.lower() in ("true", "yes"):
        return True
    if value.lower() in ("false", "no"):
        return False
    return value
out = {s: {k: typed(v) for k, v in parser.items(s)} for s in parser.sections()}
json.dump(out, open("/app/config.json", "w"), indent=2)
PY
