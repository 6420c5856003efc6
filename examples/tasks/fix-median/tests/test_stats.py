import os
import sys

# Read before the code under test loads; printed only after the last assertion (see test.sh).
with open("/tests/.token") as f:
    token = f.read().strip()
os.remove("/tests/.token")

sys.path.insert(0, "/app")
from stats import median  # noqa: E402

cases = [([3, 1, 2], 2), ([4, 1, 3, 2], 2.5), ([5], 5), ([1.5, -2.0], -0.25), ([7, 7, 1, 9, 3, 8], 7)]
for values, expected in cases:
    original = list(values)
    got = median(values)
    assert abs(got - expected) < 1e-9, f"median({original}) = {got}, expected {expected}"
    assert values == original, f"median modified its input: {original} -> {values}"
print(f"all median cases pass: {token}")
