"""python -m rollout_export BATCH [--trajectories DIR] [--address HOST:PORT] [--keep-broken]
Pulls and checks the batch's samples and prints a JSON summary (exit 1 on a bad sample)."""

import argparse
import json
import sys

from . import ExportError, SampleError, collate, pull_batch


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m rollout_export", description=__doc__)
    parser.add_argument("batch")
    parser.add_argument("--trajectories")
    parser.add_argument("--store")
    parser.add_argument("--data-dir")
    parser.add_argument("--address")
    parser.add_argument("--keep-broken", action="store_true")
    parser.add_argument("--out")
    a = parser.parse_args()
    try:
        batch = pull_batch(a.batch, trajectories=a.trajectories, store=a.store, data_dir=a.data_dir, address=a.address, keep_broken=a.keep_broken, out=a.out)
    except (ExportError, SampleError) as err:
        print(f"rollout_export: {err}", file=sys.stderr)
        return 1
    arrays = collate(batch.samples)
    print(json.dumps({
        "samples": len(batch),
        "shape": [len(arrays["input_ids"]), len(arrays["input_ids"][0]) if len(batch) else 0],
        "generated_tokens": sum(s.generated_tokens for s in batch),
        "left_out": [lo.__dict__ for lo in batch.left_out],
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
