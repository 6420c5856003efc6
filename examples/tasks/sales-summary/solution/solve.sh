#!/bin/bash
python3 - <<'PY'
import csv, json
from decimal import Decimal, ROUND_HALF_UP
totals, skipped = {}, []
with open("/app/sales.csv", newline="") as f:
    for line, row in enumerate(csv.DictReader(f), start=2):
        units = row["units"].strip()
        if not units.lstrip("-").isdigit():
            skipped.append(line)
            continue
        t = totals.setdefault(row["region"], {"units": 0, "revenue": Decimal(0)})
        t["units"] += int(units)
        t["revenue"] += int(units) * Decimal(row["unit_price"])
out = {r: {"units": t["units"], "revenue": float(t["revenue"].quantize(Decimal("0.01"), ROUND_HALF_UP))} for r, t in totals.items()}
out["skipped_lines"] = sorted(skipped)
json.dump(out, open("/app/summary.json", "w"), indent=2)
PY
