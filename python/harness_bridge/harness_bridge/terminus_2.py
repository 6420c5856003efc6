"""Harbor's terminus-2, unmodified, on a rollout's sandbox.

Run as `python -m harness_bridge.terminus_2 <run.json>` (Python >= 3.12, harbor installed); run.json
as for mini_swe_agent.py. `settings` are Terminus2's own constructor options (parser_name,
enable_summarize, proactive_summarization_threshold, tmux_pane_width, trajectory_config, ...); the
pipeline sets the model endpoint, max_turns, model_info and record_terminal_session=False (no
asciinema in the sandbox). The environment is Harbor's BaseEnvironment whose exec is the bridge.
"""
from __future__ import annotations

import asyncio
import base64
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from .sandbox import SandboxBridge

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from harbor.agents.terminus_2 import Terminus2  # noqa: E402
from harbor.environments.base import BaseEnvironment, ExecResult  # noqa: E402
from harbor.models.agent.context import AgentContext  # noqa: E402
from harbor.models.task.config import EnvironmentConfig  # noqa: E402
from harbor.models.trial.paths import TrialPaths  # noqa: E402

# Options the pipeline decides; a setting naming one is refused with why.
PIPELINE_OPTIONS = {"model_name", "api_base", "max_turns", "model_info", "record_terminal_session", "llm_kwargs", "logs_dir"}


class RolloutSandboxEnvironment(BaseEnvironment):
    """Harbor's environment interface on the rollout's sandbox: every exec is one bridge call."""

    def __init__(self, bridge: SandboxBridge, command_timeout_sec: float, **kwargs: Any) -> None:
        self.bridge = bridge
        self.command_timeout_sec = command_timeout_sec
        super().__init__(**kwargs)

    @staticmethod
    def type() -> str:
        return "rollout-sandbox"

    def _validate_definition(self) -> None:
        pass  # the pipeline provisioned the sandbox from the task's own definition

    async def start(self, force_build: bool) -> None:
        pass

    async def stop(self, delete: bool) -> None:
        await self.exec("tmux kill-server 2>/dev/null || true")

    async def exec(self, command: str, cwd: str | None = None, env: dict[str, str] | None = None,
                   timeout_sec: int | None = None, user: str | int | None = None) -> ExecResult:
        merged = self._merge_env(env) or {}
        timeout = min(float(timeout_sec or self.command_timeout_sec), self.command_timeout_sec)
        r = await asyncio.to_thread(self.bridge.exec, command, cwd=cwd, env=merged, timeout_sec=timeout)
        return ExecResult(stdout=r["stdout"], stderr=r["stderr"], return_code=r["exitCode"] if not r.get("timedOut") else 124)

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        data = base64.b64encode(Path(source_path).read_bytes()).decode()
        target = shlex.quote(target_path)
        await self._checked(f"mkdir -p \"$(dirname {target})\" && printf %s {shlex.quote(data)} | base64 -d > {target}", f"upload {source_path}")

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        for path in sorted(Path(source_dir).rglob("*")):
            if path.is_file():
                await self.upload_file(path, f"{target_dir.rstrip('/')}/{path.relative_to(source_dir).as_posix()}")

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        out = await self._checked(f"base64 -w0 {shlex.quote(source_path)}", f"download {source_path}")
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        Path(target_path).write_bytes(base64.b64decode(out))

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        listing = await self._checked(f"cd {shlex.quote(source_dir)} && find . -type f", f"list {source_dir}")
        for rel in filter(None, listing.splitlines()):
            await self.download_file(f"{source_dir.rstrip('/')}/{rel[2:]}", Path(target_dir) / rel[2:])

    async def _checked(self, command: str, what: str) -> str:
        r = await self.exec(command)
        if r.return_code != 0:
            raise RuntimeError(f"{what} in the sandbox failed ({r.return_code}): {(r.stderr or '')[:300]}")
        return r.stdout or ""


async def run_agent(run: dict[str, Any], trial_dir: Path) -> dict[str, Any]:
    settings = dict(run.get("settings") or {})
    refused = sorted(PIPELINE_OPTIONS & settings.keys())
    if refused:
        raise ValueError(f"settings {', '.join(refused)} are the pipeline's (its endpoint and limits); leave them out")
    (trial_dir / "agent").mkdir(parents=True, exist_ok=True)
    env = RolloutSandboxEnvironment(SandboxBridge(), float(run["commandTimeoutSec"]), environment_dir=trial_dir,
                                    environment_name="rollout", session_id="rollout", trial_paths=TrialPaths(trial_dir),
                                    task_env_config=EnvironmentConfig())
    agent = Terminus2(logs_dir=trial_dir / "agent", model_name=f"openai/{run['model']}", api_base=run["apiBase"],
                      max_turns=run["stepLimit"], record_terminal_session=False,
                      llm_kwargs={"api_key": "rollout-capture"},
                      model_info={"max_input_tokens": run.get("contextTokens") or 32768, "max_output_tokens": run.get("maxTokens") or 4096,
                                  "input_cost_per_token": 0.0, "output_cost_per_token": 0.0},
                      **settings)
    # Its tmux pane log goes to /logs/agent in the sandbox, as under Harbor.
    await env.exec("mkdir -p /logs/agent")
    await agent.setup(env)
    context = AgentContext()
    try:
        await agent.run(run["instruction"], env, context)
    finally:
        await env.stop(delete=False)
    episodes = agent._n_episodes  # noqa: SLF001 - what its own trajectory records as n_episodes
    if agent._pending_completion and episodes < run["stepLimit"]:  # noqa: SLF001 - confirmed task_complete
        status = "Submitted"
    elif episodes >= run["stepLimit"]:
        status = "LimitsExceeded"
    else:
        status = "SessionEnded"
    return {"exitStatus": status, "submission": None, "calls": episodes, "metadata": context.metadata}


def main(run_path: str) -> int:
    run = json.loads(Path(run_path).read_text())
    trial_dir = Path(run["trajectoryPath"]).parent / "trial"
    result: dict[str, Any] = {"exitStatus": None, "submission": None, "calls": 0}
    try:
        result = asyncio.run(run_agent(run, trial_dir))
        return 0
    except BaseException as err:  # noqa: BLE001 - reported to the worker, then raised as it came
        result.update(exitStatus=type(err).__name__, error=f"{type(err).__module__}.{type(err).__name__}: {err}"[:2000])
        raise
    finally:
        trajectory = trial_dir / "agent" / "trajectory.json"
        if trajectory.exists():
            Path(run["trajectoryPath"]).write_text(trajectory.read_text())
        Path(run["resultPath"]).write_text(json.dumps(result, default=str))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
