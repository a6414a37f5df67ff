"""How user code is isolated: bubblewrap when it works here, else the subreaper launcher alone.

Every child the runner starts goes through `reaper.py`, which kills the whole process tree when the
command ends or times out. User code (the harness) is additionally run under bubblewrap (`bwrap`)
when it is installed and can create namespaces:

- the root file system read-only; writable only: the workspace, Warp's kernel cache, and the run's
  private temp dirs (the harness config/result folder and the `outdir`s the tools hand it);
- a fresh /dev (plus `/dev/nvidia*` and `/dev/dxg` bound in when present, so CUDA still works), a
  fresh /proc, a private /dev/shm;
- its own PID namespace (the whole tree dies with the run, detached or not), IPC namespace, and
  network namespace (loopback only) unless the caller asks for the network;
- `--die-with-parent` and `--new-session` (no terminal injection).

The environment of user code is built from an allow-list; names that look like secrets are never
passed, and what a run prints is redacted of secret values and token shapes (`redact`).

What this does not isolate: the user's code can still read every file the user can read (the root
is bound read-only, not hidden), use the GPU, and use as much CPU as it likes until the timeout.

`WARPGRAD_SANDBOX_NETWORK=1` keeps the host network. `WARPGRAD_SANDBOX` selects the isolation: `auto` (default: bwrap when usable), `bwrap` (required;
a run fails with a clear error where it is unusable) or `subreaper` (never bwrap).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from .keys import KEY_DIR_ENV, key_dir
from .ledger import STATE_DIR

SANDBOX_ENV = "WARPGRAD_SANDBOX"
NETWORK_ENV = "WARPGRAD_SANDBOX_NETWORK"
REAPER = Path(__file__).with_name("reaper.py")

Isolation = Literal["bwrap", "subreaper"]
Request = Literal["auto", "bwrap", "subreaper"]
_REQUESTS: dict[str, Request] = {"auto": "auto", "bwrap": "bwrap", "subreaper": "subreaper"}


class SandboxUnavailable(RuntimeError):
    """bwrap was required (WARPGRAD_SANDBOX=bwrap) but cannot run here."""


class IsolationInfo(BaseModel):
    """Which isolation runs use here, and why."""

    isolation: Isolation = Field(description="bwrap (namespaces + read-only root) or subreaper (process tree only).")
    requested: Request = Field(description=f"What {SANDBOX_ENV} asked for.")
    bwrap_path: str | None = Field(None, description="The bwrap binary found on PATH.")
    bwrap_version: str | None = None
    reason: str = Field(description="Why this isolation, in words.")


class SandboxPolicy(BaseModel):
    """What a sandboxed run may touch."""

    workspace: Path = Field(description="Bound writable; the run's working directory lies inside it.")
    writable: list[Path] = Field(default_factory=list, description="More directories bound writable.")
    network: bool = Field(False, description="Keep the host network (default: loopback only).")
    devices: list[Path] = Field(default_factory=list, description="Device nodes bound in (GPU).")
    shm_bytes: int | None = Field(None, description="Size of the private /dev/shm (tmpfs); None: 64 MiB.")
    read_only: list[Path] = Field(default_factory=list, description="Folders bound read-only over the writable "
                                  "binds they lie in (the user's kernel cache); one that holds a writable "
                                  "folder is left as the root has it (read-only unless inside one).")


# ---------------------------------------------------------------------------------------------------
# Which isolation
# ---------------------------------------------------------------------------------------------------


def requested_isolation(env: Mapping[str, str] | None = None) -> Request:
    """The isolation asked for by `WARPGRAD_SANDBOX` (auto when unset).

    Raises:
        ValueError: The variable holds something other than auto, bwrap or subreaper.
    """
    raw = (os.environ if env is None else env).get(SANDBOX_ENV, "auto").strip().lower() or "auto"
    request = _REQUESTS.get(raw)
    if request is None:
        raise ValueError(f"{SANDBOX_ENV}={raw!r}: use auto, bwrap or subreaper")
    return request


def network_requested(env: Mapping[str, str] | None = None) -> bool:
    """True when `WARPGRAD_SANDBOX_NETWORK=1` asks to keep the host network inside bwrap."""
    return (os.environ if env is None else env).get(NETWORK_ENV, "").strip() in ("1", "true", "yes")


@functools.cache
def _probe_bwrap(path: str) -> tuple[bool, str, str | None]:
    """Can this bwrap create the namespaces we use? (ok, why not, version). Cached: ~10 ms once."""
    try:
        ver = subprocess.run([path, "--version"], check=False, capture_output=True, text=True, timeout=10).stdout.strip()
        r = subprocess.run(
            [path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--unshare-net",
             "--unshare-ipc", "--die-with-parent", "true"],
            check=False, capture_output=True, text=True, timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"{path} could not run: {e}", None
    if r.returncode != 0:
        return False, f"{path} cannot create namespaces here: {r.stderr.strip() or f'exit {r.returncode}'}", ver
    return True, "", ver


def detect_isolation(request: Request | None = None) -> IsolationInfo:
    """Which isolation a run gets here (`request` overrides `WARPGRAD_SANDBOX`)."""
    req = request or requested_isolation()
    path = shutil.which("bwrap")
    if req == "subreaper":
        return IsolationInfo(isolation="subreaper", requested=req, bwrap_path=path,
                             reason=f"{SANDBOX_ENV}=subreaper: bwrap not used")
    if path is None:
        return IsolationInfo(isolation="subreaper", requested=req,
                             reason="bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)")
    ok, why, ver = _probe_bwrap(path)
    if not ok:
        return IsolationInfo(isolation="subreaper", requested=req, bwrap_path=path, bwrap_version=ver, reason=why)
    return IsolationInfo(isolation="bwrap", requested=req, bwrap_path=path, bwrap_version=ver,
                         reason="bwrap can create PID, IPC and network namespaces here")


# ---------------------------------------------------------------------------------------------------
# Command lines
# ---------------------------------------------------------------------------------------------------


def reaper_argv(cmd: list[str], memory_mb: int | None, status_fd: int = -1) -> list[str]:
    """`cmd` under the subreaper launcher, with an address-space cap when `memory_mb` is given.

    `status_fd`: an inherited descriptor the launcher writes the command's `exit N`/`signal N` to.
    """
    cap = memory_mb * 2**20 if memory_mb else 0
    # -I -S: no user site, no PYTHON* variables, no site import: the launcher starts in milliseconds.
    return [sys.executable, "-I", "-S", str(REAPER), str(cap), str(status_fd), *cmd]


def gpu_devices(dev: Path = Path("/dev")) -> list[Path]:
    """The device nodes CUDA needs (`/dev/nvidia*`, `/dev/nvidia-caps`, WSL's `/dev/dxg`) that exist."""
    found = sorted(p for p in dev.glob("nvidia*"))
    if (dev / "dxg").exists():
        found.append(dev / "dxg")
    return found


DEFAULT_SHM_BYTES = 64 * 2**20  # what Docker gives a container's /dev/shm


def state_dir_for_run(workspace: Path) -> Path | None:
    """`<workspace>/.warpgrad`, created (0700) when missing, so user code finds it bound read-only rather
    than free to create it (as a link to a folder outside, or full of planted links).

    Raises:
        SandboxUnavailable: It exists but is a link or not a folder (warpgrad keeps its state only in a
            real folder of the workspace).
    """
    if not Path(workspace).is_dir():
        return None  # bwrap refuses to bind a workspace that is not there: nothing runs
    state = Path(workspace).resolve() / STATE_DIR
    with contextlib.suppress(FileExistsError):
        state.mkdir(mode=0o700)
    if state.is_symlink() or not state.is_dir():
        raise SandboxUnavailable(f"{state} is a link or not a folder; warpgrad keeps its state only in a real "
                                 "folder: remove it (warpgrad recreates it) and run again")
    return state


def bwrap_argv(policy: SandboxPolicy, cmd: list[str], *, cwd: Path, bwrap: str = "bwrap") -> list[str]:
    """The bwrap command line that runs `cmd` in `cwd` under `policy`.

    `/dev` is read-only once its nodes are in (bwrap's /dev is a tmpfs of unbounded size), `/dev/shm` a tmpfs
    of `policy.shm_bytes`, and the workspace's `.warpgrad/` (warpgrad's state: ledger, head, backups, locks)
    is bound read-only on top of the writable workspace (created first when missing, `state_dir_for_run`).

    Raises:
        SandboxUnavailable: The workspace's `.warpgrad` is a link or not a folder.
    """
    shm = policy.shm_bytes or DEFAULT_SHM_BYTES
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--size", str(shm), "--tmpfs", "/dev/shm",
            "--proc", "/proc"]
    for d in policy.devices:
        argv += ["--dev-bind", str(d), str(d)]
    argv += ["--remount-ro", "/dev"]
    seen: set[str] = set()
    for d in [policy.workspace, *policy.writable]:
        real = str(Path(d).resolve())
        if real not in seen:
            seen.add(real)
            argv += ["--bind", real, real]
    state = state_dir_for_run(policy.workspace)
    if state is not None:
        argv += ["--ro-bind", str(state), str(state)]
    for d in policy.read_only:
        real_ro = Path(d).resolve()
        # Over a folder that holds a writable bind, a read-only bind would hide that bind.
        if real_ro.is_dir() and not any(Path(w).is_relative_to(real_ro) for w in seen):
            argv += ["--ro-bind", str(real_ro), str(real_ro)]
    keys = key_dir().resolve()
    if keys.is_dir() and not any(keys.is_relative_to(Path(d).resolve()) for d in [policy.workspace, *policy.writable]):
        # warpgrad's private state: the ledger's signing key (unreadable to user code) and the warm command server's
        # socket (a script that reached it could run warpgrad commands outside the sandbox; cli/warm).
        argv += ["--tmpfs", str(keys)]
    argv += ["--unshare-pid", "--unshare-ipc"]
    if not policy.network:
        argv.append("--unshare-net")
    argv += ["--die-with-parent", "--new-session", "--chdir", str(Path(cwd).resolve()), "--", *cmd]
    return argv


def warp_cache_dir(env: Mapping[str, str]) -> Path:
    """Where Warp writes compiled kernels: `WARP_CACHE_PATH`, else its default under the user cache dir."""
    if env.get("WARP_CACHE_PATH"):
        return Path(env["WARP_CACHE_PATH"]).expanduser()
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base).expanduser() / "warp"


# ---------------------------------------------------------------------------------------------------
# Environment and secrets
# ---------------------------------------------------------------------------------------------------

ALLOWED_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR",
    "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "LD_LIBRARY_PATH", "XDG_CACHE_HOME",
    "PYTHONPATH", "PYTHONHASHSEED", "PYTHONUNBUFFERED", "PYTHONFAULTHANDLER", "PYTHONDONTWRITEBYTECODE",
    "PYTHONIOENCODING", "PYTHONUTF8",
})
ALLOWED_PREFIXES = ("LC_", "WARP_", "WARPGRAD_", "CUDA_", "NVIDIA_", "OMP_", "MKL_", "OPENBLAS_")
_SECRET_NAME = re.compile(r"(_KEY|_TOKEN|_SECRET|_PASSWORD|_CREDENTIALS?)$|^ANTHROPIC_", re.IGNORECASE)
# Token shapes that are secrets wherever they appear (Anthropic, OpenAI, GitHub, AWS, Slack, Hugging Face).
_TOKEN_SHAPES = re.compile(
    r"sk-ant-[A-Za-z0-9_\-]{8,}|sk-(?:proj-)?[A-Za-z0-9_\-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|AKIA[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9\-]{10,}|hf_[A-Za-z0-9]{20,}"
)
REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 8  # shorter values ("1", "true") would redact ordinary output


def is_secret_name(name: str) -> bool:
    """True for variable names that hold secrets: *_KEY, *_TOKEN, *_SECRET, *_PASSWORD, ANTHROPIC_*."""
    return bool(_SECRET_NAME.search(name))


PASS_ENV = "WARPGRAD_PASS_ENV"


def child_env(base: Mapping[str, str], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment user code gets: the allow-listed part of `base`, never a secret, plus `extra`.

    A script that needs more of the user's variables names them in `WARPGRAD_PASS_ENV` (comma
    separated); secret-looking names are withheld even then.
    """
    asked = {n.strip() for n in base.get(PASS_ENV, "").split(",") if n.strip()}
    env = {k: v for k, v in base.items()
           if (k in ALLOWED_NAMES or k in asked or k.startswith(ALLOWED_PREFIXES)) and not is_secret_name(k)
           and k != KEY_DIR_ENV}
    for k, v in (extra or {}).items():
        if is_secret_name(k):
            raise ValueError(f"{k} looks like a secret; it is never passed to user code")
        env[k] = v
    return env


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """Values of the secret-named variables in `env` (default: this process's), longest first."""
    env = os.environ if env is None else env
    vals = {v for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_SECRET_CHARS}
    return sorted(vals, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str] | None = None) -> str:
    """`text` with every secret value and every token-shaped string replaced by `[REDACTED]`."""
    for s in secret_values() if secrets is None else secrets:
        if s in text:
            text = text.replace(s, REDACTED)
    return _TOKEN_SHAPES.sub(REDACTED, text)


# ---------------------------------------------------------------------------------------------------
# `warpgrad doctor`
# ---------------------------------------------------------------------------------------------------
