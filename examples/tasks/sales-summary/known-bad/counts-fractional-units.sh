#!/bin/bash
# Treats 2.5 units as a valid row (only skips non-numbers).
python3 - <<'PY'
import csv, json
totals, skipped = {}, []
with open("/app/sales.csv", newline="") as f:
    for line, row in enumerate(csv.DictReader(f), start=2):
        try:
            units = float(row["units"])
        except ValueError:
            skipped.append(line)
            continue
        t = totals.setdefault(row["region"], {"units": 0, "revenue": 0.0})
        t["units"] += units
        t["revenue"] += units * float(row["unit_price"])
out = {r: {"units": t["units"], "revenue": round(t["revenue"], 2)} for r, t in totals.items()}
out["skipped_lines"] = skipped
json.dump(out, open("/app/summary.json", "w"))
PY
