import json

expected = {
    "north": {"units": 5, "revenue": 27.7},
    "south": {"units": 5, "revenue": 3.84},
    "east": {"units": 7, "revenue": 70.7},
    "west": {"units": 10, "revenue": 3.35},
    "skipped_lines": [5, 8],
}
with open("/app/summary.json") as f:
    got = json.load(f)
assert set(got) == set(expected), f"keys {sorted(got)} != {sorted(expected)}"
assert got["skipped_lines"] == expected["skipped_lines"], got["skipped_lines"]
for region, want in expected.items():
    if region == "skipped_lines":
        continue
    assert got[region]["units"] == want["units"] and isinstance(got[region]["units"], int), (region, got[region])
    assert abs(got[region]["revenue"] - want["revenue"]) < 0.005, (region, got[region])
print("summary correct")
