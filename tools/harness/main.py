"""Entry point of the harness subprocess: `python -m warpgrad.tools.harness.main CONFIG.json`.

Runs the user's script as `python script.py args...` would (sys.argv, sys.path[0], __main__), with
Warp's logger captured, seeds pinned, and the listeners named by the config installed on Warp's API.
Writes one JSON document to `$WARPGRAD_RESULT` and exits; the user's script keeps stdout/stderr.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import runpy
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from . import module_files
from .protocol import (
    HARNESS_CONFIG,
    PROTOCOL_VERSION,
    BatchConfig,
    ChildError,
    ChildErrorKind,
    FdConfig,
    HarnessResult,
    LogSite,
    ResultStatus,
    SessionMode,
    TracebackFrame,
    WarpLogRecord,
    harness_error,
    result_type,
)

MODES = {
    "run": "warpgrad.tools.harness.capture:RunListener",
    "capture": "warpgrad.tools.harness.capture:CaptureListener",
    "fd": "warpgrad.tools.harness.capture:CaptureListener",
    "probe": "warpgrad.tools.harness.probe:ProbeListener",
}


class WarpLog:
    """A Warp logger (see `wp.set_logger`) that keeps messages instead of printing them.

    Warp's chatter (banner, module loads) must not look like user output, and its warnings
    (overwrite tracker, disabled backward) are evidence; `warnings.catch_warnings` cannot see them.
    """

    def __init__(self) -> None:
        self.records: list[WarpLogRecord] = []
        self.compiled: list[str] = []

    def _add(self, level: str, message: str, category: str | None = None) -> None:
        from . import hooks

        cur = hooks.STATE.current
        site = None
        if cur is not None:
            site = LogSite(file=cur.site.get("file"), line=cur.site.get("line"), func=cur.site.get("func"),
                           kernel=getattr(getattr(cur, "kernel", None), "key", None),
                           op="copy" if isinstance(cur, hooks.CopyCall) else "launch")
        if level == "info" and message.startswith("Module ") and "(compiled)" in message:
            self.compiled.append(message.split()[1])
        self.records.append(WarpLogRecord(level=level, message=str(message), category=category, site=site))

    def evidence(self) -> list[dict[str, Any]]:
        """Warp's warnings and errors, as the result's `warp_log` (the first 500: a loop can repeat one forever)."""
        return [r.model_dump() for r in self.records if r.level in ("warning", "error")][:500]

    def debug(self, msg: str) -> None:
        self._add("debug", msg)

    def info(self, msg: str) -> None:
        self._add("info", msg)

    def warning(self, msg: str, category=None, stacklevel: int = 1) -> None:
        self._add("warning", msg, getattr(category, "__name__", None))

    def error(self, msg: str) -> None:
        self._add("error", msg)
        print(f"Warp Error: {msg}", file=sys.stderr)


class Session:
    def __init__(self, config: SessionMode, log: WarpLog | None = None) -> None:
        self.config = config
        self.workspace = Path(config.workspace).resolve()
        self.script = Path(config.script).resolve() if config.script else None
        self.listeners: list[Any] = []
        self.log = log or WarpLog()
        self.started = time.monotonic()
        self.result_path = os.environ["WARPGRAD_RESULT"]
        self.done = False

    def files(self) -> dict[str, str]:
        """sha256 of every workspace file this run imported (the evidence names what it exercised)."""
        return module_files.workspace_files(self.workspace, self.script, self.config.extra_files)

    def finish(self, status: ResultStatus, error: ChildError | None = None) -> None:
        """Write the report and end the process now (the rest of the user's script must not run)."""
        if self.done:
            return
        self.done = True
        import warp as wp

        from . import warp_compat

        data: dict[str, Any] = {
            "status": status,
            "error": error.model_dump() if error is not None else None,
            "warp_version": wp.__version__,
            "device": str(wp.get_device()) if warp_compat.runtime_initialized() else "uninitialized",
            "wall_s": round(time.monotonic() - self.started, 3),
            "files": self.files(),
            "files_changed": module_files.changed_during_run(self.workspace),
            "warp_log": self.log.evidence(),
            "compiled_modules": self.log.compiled,
        }
        for listener in self.listeners:
            try:
                section = listener.result()  # a protocol model (`Section`), or a dict the parent validates
                data[listener.key] = section.model_dump() if isinstance(section, BaseModel) else section
            except Exception as e:  # noqa: BLE001 - a broken listener must not hide the others' evidence
                data[listener.key] = {"listener_error": f"{type(e).__name__}: {e}"}
            broken = getattr(listener, "broken", None)
            if broken:
                data.setdefault("listener_errors", {})[listener.key] = broken
        write_result(self.result_path, checked_result(data, self.config.mode))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


SESSION: Session | None = None

def _jsonable(o: Any) -> Any:
    """What `to_jsonable_python` cannot serialize itself: numpy scalars and arrays as numbers, anything else as repr."""
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return repr(o)


def checked_result(data: dict[str, Any], mode: str) -> dict[str, Any]:
    """`data` as plain JSON values, validated against the protocol; a document that does not match is our bug,
    reported as a harness error rather than handed to the parent to misread."""
    doc: dict[str, Any] = {"version": PROTOCOL_VERSION, **to_jsonable_python(data, fallback=_jsonable)}
    try:
        result_type(mode).model_validate(doc)
    except ValidationError as e:
        out = harness_error(f"warpgrad's harness wrote a result that does not match protocol version "
                            f"{PROTOCOL_VERSION} (a bug in warpgrad, not in your script): {e}")
        return out | {k: doc[k] for k in ("warp_version", "device", "wall_s", "files") if k in doc}
    return doc


def write_result(path: str, doc: dict[str, Any]) -> None:
    """Write the result document atomically: the parent never reads half of one. NaN and inf stay as JSON
    constants (json.loads on the parent side reads them back)."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    os.replace(tmp, path)


def _load(spec: str):
    mod, _, name = spec.partition(":")
    return getattr(importlib.import_module(mod), name)


_HARNESS_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _user_traceback(exc: BaseException, script: Path | None) -> list[TracebackFrame]:
    frames = []
    for fs in traceback.extract_tb(exc.__traceback__):
        # By our own folder, not by name: a source checkout need not live in a folder called "warpgrad".
        if fs.filename.startswith(_HARNESS_DIR):
            continue
        if fs.filename.startswith("<frozen") or "/runpy.py" in fs.filename:
            continue
        frames.append(TracebackFrame(file=fs.filename, line=fs.lineno, func=fs.name, code=fs.line))
    return frames[-12:]


def classify(exc: BaseException) -> ChildErrorKind:
    if isinstance(exc, SyntaxError):
        return "syntax_error"
    if isinstance(exc, ModuleNotFoundError):
        return "missing_import"
    if isinstance(exc, ImportError):
        return "import_error"
    if isinstance(exc, MemoryError):
        return "out_of_memory"
    if isinstance(exc, FileNotFoundError):
        return "file_not_found"
    return "script_raised"


EXIT_HARNESS_FAILED = 70
"""Exit status of a harness that failed itself (EX_SOFTWARE), its result document written where it could be."""


def boot(cfg: SessionMode, log: WarpLog) -> None:
    """Import and initialize Warp with the config's flags, and install the hooks (no listener yet).

    A failure here is ours or the environment's (an unsupported or broken Warp, a device that does not
    exist), never the user's script's: it is reported in the result document and the process ends.
    """
    started = time.monotonic()
    try:
        _boot(cfg, log)
    except Exception as e:  # noqa: BLE001 - any failure to start is reported, not left as a missing result
        _boot_failed(e, log, started)


def _boot_failed(e: Exception, log: WarpLog, started: float) -> None:
    """Write the result document of a harness that could not start, then end the process."""
    version = getattr(sys.modules.get("warp"), "__version__", None)
    message = ("warpgrad could not start Warp in its harness (a failure of warpgrad or of its environment, "
               f"not of your script): {type(e).__name__}: {e}")[:2000]
    # Versioned like every result: the parent refuses an unversioned document as a mismatched install.
    data: dict[str, Any] = {
        "version": PROTOCOL_VERSION,
        "status": "harness_error",
        "error": {
            "kind": "harness_failed",
            "cause": getattr(e, "kind", "warp_start"),
            "type": type(e).__name__,
            "message": message,
            "harness_traceback": traceback.format_exc(limit=12),
        },
        "warp_version": version,
        "device": "uninitialized",
        "wall_s": round(time.monotonic() - started, 3),
        "files": {},
        "warp_log": log.evidence(),
        "compiled_modules": log.compiled,
    }
    path = os.environ.get("WARPGRAD_RESULT")
    if path:
        write_result(path, data)
    print(f"warpgrad harness: {message}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_HARNESS_FAILED)


def _boot(cfg: SessionMode, log: WarpLog) -> None:
    import warp as wp

    from . import warp_compat  # noqa: F401 - checks the Warp version before anything else touches Warp

    if cfg.tracker:
        # Must be set before any module is built: it changes codegen and the module hash.
        wp.config.verify_autograd_array_access = True
        if cfg.tracker_cache:
            from . import tracker_cache

            tracker_cache.install()  # codegen again, reuse the cached tracker binary (no native recompile)
    if cfg.log_level == "debug":
        wp.config.log_level = wp.LOG_DEBUG
    wp.set_logger(log)
    wp.init()
    if cfg.device:
        wp.set_device(cfg.device)

    from . import hooks

    hooks.install()


def read_config(path: Path) -> SessionMode | BatchConfig | str:
    """The config at `path`, or why it cannot be used (our failure: the parent wrote it)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return f"warpgrad's harness could not read its config {path}: {e}"
    version = raw.get("version") if isinstance(raw, dict) else None
    if version != PROTOCOL_VERSION:
        return (f"warpgrad's harness speaks protocol version {PROTOCOL_VERSION} but was given a config of version "
                f"{version}: the parent and the harness come from different warpgrad installs (reinstall warpgrad)")
    try:
        return HARNESS_CONFIG.validate_python(raw)
    except ValidationError as e:
        return f"warpgrad's harness was given an invalid config (a bug in warpgrad, not in your script): {e}"


def main(argv: list[str]) -> None:
    cfg = read_config(Path(argv[0]))
    if isinstance(cfg, str):
        write_result(os.environ["WARPGRAD_RESULT"], harness_error(cfg))
        return
    if isinstance(cfg, BatchConfig):
        run_batch(cfg)
        return
    log = WarpLog()
    if is_hub(cfg):
        from . import forking

        forking.limit_threads()  # before boot imports numpy: the hub forks in the middle of the script
    boot(cfg, log)
    run_session(cfg, log)


def is_hub(cfg: SessionMode) -> bool:
    """An FD hub (`harness.serve`): a session that forks in the middle of the user's script."""
    return isinstance(cfg, FdConfig) and cfg.capture.serve is not None


def run_batch(cfg: BatchConfig) -> None:
    """Run many short sessions (FD evaluations) from one booted process: fork per session.

    Importing and initializing Warp costs more than a short evaluation itself; a forked child
    inherits it. Only for CPU runs: CUDA does not survive a fork (the runtime never asks for this
    when CUDA is in play).
    """
    from . import forking

    forking.limit_threads()  # before boot imports numpy: its BLAS pool would be threads alive at the fork
    boot(cfg.batch[0], WarpLog())
    out = forking.fork_each([sub.timeout_s for sub in cfg.batch])
    if isinstance(out, int):  # the child: one session, then exit without returning into the loop
        sub = cfg.batch[out]
        try:
            os.environ["WARPGRAD_RESULT"] = str(sub.result)
            forking.redirect_streams(str(sub.stderr))
            run_session(sub, WarpLog())
        finally:
            os._exit(70)
    doc = HarnessResult(status="completed", batch=out)
    write_result(os.environ["WARPGRAD_RESULT"], doc.model_dump(mode="json", exclude_none=True))
    sys.stdout.flush()
    os._exit(0)


def run_session(cfg: SessionMode, log: WarpLog) -> None:
    global SESSION  # noqa: PLW0603 - one session per child process; hooks find it here
    SESSION = session = Session(cfg, log)
    from . import forking

    # A forked run computes with the user's BLAS threads, as a fresh process does; a hub's evaluations get
    # theirs after the hub forks them (threads started now would make the hub unforkable).
    forking.restore_threads(defer_pool=is_hub(cfg))
    random.seed(cfg.seed)
    import numpy as np
    import warp as wp

    np.random.seed(cfg.seed)
    wp.set_logger(log)

    from . import hooks

    specs = [MODES[cfg.mode], *cfg.listeners]
    for spec in specs:
        listener = _load(spec)(session)
        session.listeners.append(listener)
        hooks.add_listener(listener)

    for listener in session.listeners:
        start = getattr(listener, "start", None)
        if start:
            start()  # a probe-driven mode does all its work here and finishes

    script = session.script
    if script is None:
        session.finish("no_script", ChildError(kind="config", message="no script given"))
        return
    if not script.is_file():
        session.finish("error", ChildError(kind="file_not_found", message=f"script not found: {script}"))
        return
    sys.argv = [str(script), *cfg.args]
    sys.path.insert(0, str(script.parent))
    error = _run_script(script)
    hooks.notify(session.listeners, "script_end")  # a listener failing here is ours: recorded, not fatal
    session.finish("completed" if error is None else "error", error)


def _run_script(script: Path) -> ChildError | None:
    """Run the user's script as `__main__`; how it failed, or None when it completed (or exited with status 0)."""
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) or e.code is None else 1
        if code not in (0, None):
            return ChildError(kind="exit_code", message=f"the script called sys.exit({e.code!r})", exit_code=code)
    except KeyboardInterrupt:
        return ChildError(kind="interrupted", message="KeyboardInterrupt")
    except BaseException as e:  # noqa: BLE001 - the user's failure is the finding; report it instead of dying
        return user_error(e, script)
    return None


def user_error(e: BaseException, script: Path | None) -> ChildError:
    """The error of a session whose script (or probe) raised `e`, with the user's frames only."""
    error = ChildError(kind=classify(e), type=type(e).__name__, message=str(e)[:2000],
                       traceback=_user_traceback(e, script))
    if isinstance(e, SyntaxError):
        error.file, error.line = e.filename, e.lineno
    return error


if __name__ == "__main__":
    main(sys.argv[1:])
