"""A Python trainer starting one GRPO group of rollout-pipeline by name.

Uses the official temporalio SDK; the workflow input is the same JSON the
TypeScript client sends (defaults are applied by the workflow, which also pins
the task version). Prints the group result as JSON.

    python submit_group.py <task-dir> <batch-id> [group-size]

Environment: TEMPORAL_ADDRESS (default 127.0.0.1:7233), ROLLOUT_MAIN_QUEUE and
ROLLOUT_POLICY_QUEUE (defaults: the pipeline's standard queues).

A Temporal server that is unreachable or restarting is waited out: the connect,
the start and the wait for the result are retried with backoff on transient
errors (said once on stderr), and the start is idempotent (a group already
started under the same id is attached to), so no finished result is lost.
"""

import asyncio
import json
import os
import sys

from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

TRANSIENT = {
    RPCStatusCode.UNAVAILABLE,
    RPCStatusCode.DEADLINE_EXCEEDED,
    RPCStatusCode.UNKNOWN,
    RPCStatusCode.RESOURCE_EXHAUSTED,
    RPCStatusCode.ABORTED,
}


def transient(err: BaseException) -> bool:
    if isinstance(err, RPCError):
        return err.status in TRANSIENT
    # Client.connect reports a refused or dropped connection as a RuntimeError.
    return isinstance(err, RuntimeError) and "Failed client connect" in str(err)


async def ride_out(address, what, call):
    """Runs call() until it returns or fails with a non-transient error."""
    delay = 0.5
    waiting = False
    while True:
        try:
            value = await call()
        except (RPCError, RuntimeError) as err:
            if not transient(err):
                raise
            if not waiting:
                print(f"waiting for the Temporal server at {address} (for {what}): {err}; retrying until it answers", file=sys.stderr)
                waiting = True
            await asyncio.sleep(delay)
            delay = min(15.0, delay * 2)
            continue
        if waiting:
            print(f"the Temporal server at {address} answers again; carrying on", file=sys.stderr)
        return value


async def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    task_dir = os.path.abspath(sys.argv[1])
    batch_id = sys.argv[2]
    group_size = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    main_queue = os.environ.get("ROLLOUT_MAIN_QUEUE", "rollout-pipeline")
    policy_queue = os.environ.get("ROLLOUT_POLICY_QUEUE", "rollout-pipeline-policy")

    address = os.environ.get("TEMPORAL_ADDRESS", "127.0.0.1:7233")
    client = await ride_out(address, "a connection", lambda: Client.connect(address))
    request = {
        "batchId": batch_id,
        "task": {"dir": task_dir},
        "groupSize": group_size,
        "policy": {"kind": "scripted", "script": "mixed"},
        "minValid": 1,
        "taskQueues": {"main": main_queue, "policy": policy_queue},
    }
    task_id = os.path.basename(task_dir.rstrip("/"))
    workflow_id = f"rollout/{batch_id}/{task_id}"

    async def start():
        try:
            return await client.start_workflow("rolloutGroup", request, id=workflow_id, task_queue=main_queue)
        except WorkflowAlreadyStartedError:
            # Started by an earlier try whose answer was lost, or by an earlier run: attach to it.
            return client.get_workflow_handle(workflow_id)

    try:
        handle = await ride_out(address, f"starting {workflow_id}", start)
        result = await ride_out(address, f"the result of {workflow_id}", handle.result)
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
