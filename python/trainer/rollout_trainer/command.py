"""What every `python -m rollout_trainer.<module>` command does with a failure it can name: one line on
stderr that starts with the command's name and says what failed and the fix, and exit status 2 (no
traceback for a bad input)."""

from __future__ import annotations

import sys
from typing import Callable

from rollout_export import SampleError

from .adapter_failure import AdapterConversionError
from .policy_model import PolicyModelError

NAMED_FAILURES = (SampleError, PolicyModelError, AdapterConversionError, ValueError, OSError)


def run_command(prog: str, work: Callable[[], None]) -> int:
    """Runs `work`; a named failure is printed as `prog: message` and gives exit status 2."""
    try:
        work()
    except ImportError as err:
        print(f"{prog}: {err}: use the python of the train venv (bash scripts/setup.sh train prints ROLLOUT_TRAIN_PYTHON)", file=sys.stderr)
        return 2
    except NAMED_FAILURES as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return 2
    return 0
