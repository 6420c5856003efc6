"""mini-swe-agent, unmodified, on a rollout's sandbox.

Run as `python -m harness_bridge.mini_swe_agent <run.json>`; run.json holds what the worker decided:
{"instruction", "apiBase", "model", "workdir", "commandTimeoutSec", "stepLimit", "settings",
"trajectoryPath", "resultPath"}. `settings` are mini-swe-agent's own (keys `agent`, `model`,
`environment`), merged over its `mini.yaml`. The result file gets {"exitStatus", "submission", "calls"}.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from .sandbox import SandboxBridge

# Before minisweagent and litellm are imported: no cost-map download, no banner, no ~/.config.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")

import yaml  # noqa: E402
from minisweagent import package_dir  # noqa: E402
from minisweagent.agents.default import AgentConfig, DefaultAgent  # noqa: E402
from minisweagent.environments.local import LocalEnvironment  # noqa: E402
from minisweagent.models.litellm_model import LitellmModel  # noqa: E402
from minisweagent.utils.serialize import recursive_merge  # noqa: E402


class RolloutSandboxEnvironment(LocalEnvironment):
    """mini-swe-agent's Environment on the rollout's sandbox: each action is one command there."""

    def __init__(self, bridge: SandboxBridge, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bridge = bridge

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        command = action.get("command", "")
        try:
            r = self.bridge.exec(command, cwd=cwd or self.config.cwd or None, env=self.config.env,
                                 timeout_sec=timeout or self.config.timeout,
                                 label={"toolCallId": action.get("tool_call_id")})
            # Like LocalEnvironment: stdout and stderr as one text.
            output = {"output": r["stdout"] + r["stderr"], "returncode": r["exitCode"], "exception_info": ""}
            if r.get("timedOut"):
                output = {"output": r["stdout"] + r["stderr"], "returncode": -1,
                          "exception_info": f"An error occurred while executing the command: timed out after {timeout or self.config.timeout} s",
                          "extra": {"exception_type": "TimeoutExpired", "exception": "timed out"}}
        except RuntimeError as err:
            output = {"output": "", "returncode": -1, "exception_info": f"An error occurred while executing the command: {err}",
                      "extra": {"exception_type": type(err).__name__, "exception": str(err)}}
        self._check_finished(output)
        return output


def main(run_path: str) -> int:
    run = json.loads(Path(run_path).read_text())
    config = yaml.safe_load((package_dir / "config" / "mini.yaml").read_text())
    config = recursive_merge(config, run.get("settings") or {})
    agent_config = {k: v for k, v in (config.get("agent") or {}).items() if k in AgentConfig.model_fields}
    # The pipeline's limits: its capture endpoint counts turns too, and prices nothing.
    agent_config.update(step_limit=run["stepLimit"], cost_limit=0, output_path=Path(run["trajectoryPath"]))
    model_config = dict(config.get("model") or {})
    model_kwargs = {**(model_config.pop("model_kwargs", None) or {}), "api_base": run["apiBase"], "api_key": "rollout-capture"}
    model_config.pop("model_name", None)
    model_config.pop("model_class", None)
    model = LitellmModel(model_name=f"openai/{run['model']}", model_kwargs=model_kwargs, cost_tracking="ignore_errors", **model_config)
    env_config = {k: v for k, v in (config.get("environment") or {}).items() if k in ("cwd", "env", "timeout")}
    env_config.setdefault("cwd", run["workdir"])
    env_config["timeout"] = min(int(env_config.get("timeout") or run["commandTimeoutSec"]), int(run["commandTimeoutSec"]))
    agent = DefaultAgent(model, RolloutSandboxEnvironment(SandboxBridge(), **env_config), **agent_config)
    result: dict[str, Any] = {"exitStatus": None, "submission": None, "calls": 0}
    try:
        out = agent.run(run["instruction"])
        result.update(exitStatus=out.get("exit_status"), submission=out.get("submission"), calls=agent.n_calls)
        return 0
    except BaseException as err:  # noqa: BLE001 - reported to the worker, then raised as it came
        result.update(exitStatus=type(err).__name__, error=f"{type(err).__module__}.{type(err).__name__}: {err}"[:2000], calls=agent.n_calls)
        raise
    finally:
        Path(run["resultPath"]).write_text(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
