"""`warpgrad doctor`: which isolation user code gets here, proven by one sandboxed run.

Above both `sandbox.py` (the policy) and `child_process.py` (which applies it), so neither imports the other.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pydantic import BaseModel, Field

from .child_process import run_process
from .sandbox import (
    IsolationInfo,
    SandboxPolicy,
    child_env,
    detect_isolation,
    gpu_devices,
    network_requested,
    warp_cache_dir,
)


class DoctorReport(BaseModel):
    """What `warpgrad doctor` found about isolation on this machine."""

    isolation: IsolationInfo
    live_check: str = Field(description="A tiny command run the way user code is run: 'ok', or what failed.")
    live_check_s: float = Field(description="Wall time of that run, launch included.")
    kernel_cache: str = Field(description="Warp's kernel cache folder (writable inside the sandbox).")
    gpu_devices: list[str] = Field(description="GPU device nodes bound into the sandbox.")
    withheld_env: list[str] = Field(description="Variables of this environment never passed to user code (names).")
    network: str = "loopback only (a new network namespace)"


def doctor(workspace: Path) -> DoctorReport:
    """Say which isolation runs get here, and prove it with one sandboxed run in `workspace`."""
    info = detect_isolation()
    env = child_env(os.environ)
    cache = warp_cache_dir(env)
    cache.mkdir(parents=True, exist_ok=True)
    policy = SandboxPolicy(workspace=workspace, writable=[cache], devices=gpu_devices(), network=network_requested())
    r = run_process([sys.executable, "-c", "print('sandboxed')"], cwd=workspace, env=env, timeout_s=60,
                    sandbox=policy)
    live = "ok" if r.ok and "sandboxed" in r.stdout_tail else f"failed: {r.describe()}: {r.stderr_tail[-400:]}"
    return DoctorReport(
        isolation=info, live_check=live, live_check_s=r.wall_s, kernel_cache=str(cache),
        gpu_devices=[str(d) for d in policy.devices],
        withheld_env=sorted(k for k in os.environ if k not in env),
        network="the host's (no isolation)" if info.isolation != "bwrap" or policy.network
        else "loopback only (a new network namespace)",
    )
