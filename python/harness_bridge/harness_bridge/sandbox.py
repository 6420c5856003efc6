"""The rollout's sandbox as the worker serves it to a harness: one HTTP call per command."""
from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any


class SandboxBridge:
    """Runs commands in the rollout's sandbox through the worker (`POST <url>/exec`)."""

    def __init__(self, url: str | None = None) -> None:
        self.url = (url or os.environ["ROLLOUT_SANDBOX_BRIDGE"]).rstrip("/")

    def exec(self, command: str, *, cwd: str | None = None, env: dict[str, str] | None = None,
             timeout_sec: float | None = None, label: dict[str, Any] | None = None) -> dict[str, Any]:
        """{"stdout", "stderr", "exitCode", "timedOut"}; raises RuntimeError when the worker refuses."""
        body = {"command": command, "cwd": cwd, "env": env or {}, "timeoutSec": timeout_sec, "label": label or {}}
        request = urllib.request.Request(f"{self.url}/exec", data=json.dumps(body).encode(), method="POST",
                                         headers={"content-type": "application/json"})
        try:
            # The worker bounds the command by its own timeout; this only guards against a worker gone silent.
            with urllib.request.urlopen(request, timeout=(timeout_sec or 3600) + 120) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as err:
            raise RuntimeError(f"sandbox bridge refused the command ({err.code}): {err.read().decode(errors='replace')[:500]}") from err
