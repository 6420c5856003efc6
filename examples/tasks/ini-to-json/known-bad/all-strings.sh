#!/bin/bash
python3 - <<'PY'
import configparser, json
parser = configparser.ConfigParser(interpolation=None)
parser.read("/app/config.ini")
json.dump({s: dict(parser.items(s)) for s in parser.sections()}, open("/app/config.json", "w"))
PY
