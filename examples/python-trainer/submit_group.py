"""A Python trainer starting one GRPO group of rollout-pipeline by name.

Uses the official temporalio SDK; the workflow input is the same JSON the
TypeScript client sends (defaults are applied by the workflow, which also pins
the task version). Prints the group result as JSON.

    python submit_group.py <task-dir> <batch-id> [group-size]

Environment: TEMPORAL_ADDRESS (default 127.0.0.1:7233), ROLLOUT_MAIN_QUEUE and
ROLLOUT_POLICY_QUEUE (defaults: the pipeline's standard queues).
"""

import asyncio
import json
import os
import sys

from temporalio.client import Client, WorkflowFailureError


async def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    task_dir = os.path.abspath(sys.argv[1])
    batch_id = sys.argv[2]
    group_size = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    main_queue = os.environ.get("ROLLOUT_MAIN_QUEUE", "rollout-pipeline")
    policy_queue = os.environ.get("ROLLOUT_POLICY_QUEUE", "rollout-pipeline-policy")

    client = await Client.connect(os.environ.get("TEMPORAL_ADDRESS", "127.0.0.1:7233"))
    request = {
        "batchId": batch_id,
        "task": {"dir": task_dir},
        "groupSize": group_size,
        "policy": {"kind": "scripted", "script": "mixed"},
        "minValid": 1,
        "taskQueues": {"main": main_queue, "policy": policy_queue},
    }
    task_id = os.path.basename(task_dir.rstrip("/"))
    try:
        result = await client.execute_workflow(
            "rolloutGroup",
            request,
            id=f"rollout/{batch_id}/{task_id}",
            task_queue=main_queue,
        )
    except WorkflowFailureError as err:
        print(f"group failed: {err.cause}", file=sys.stderr)
        return 1
    print(
        json.dumps(
            {
                "status": result["status"],
                "taskVersion": result["taskVersion"],
                "rewards": [r["reward"] for r in result["rollouts"]],
                "advantages": [r["advantage"] for r in result["rollouts"]],
            }
        )
    )
    return 0


if __name__ == "__main__":
    code = asyncio.run(main())
    sys.stdout.flush()
    sys.stderr.flush()
    # A short-lived process that used the SDK's client can abort during interpreter
    # shutdown ("PyGILState_Release: thread state ... must be current", temporalio
    # sdk-python issue #300: the Rust runtime's threads outlive the event loop).
    # Everything is printed and flushed by now, so skip the interpreter teardown.
    os._exit(code)
