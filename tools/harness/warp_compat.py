"""Every read or patch of Warp internals the harness makes, in one place, checked against the Warp version.

The harness observes Warp from the inside: the tape being recorded, the records on a tape, the module
build, the optimizers. Warp exposes none of these as public API, so each access is a named function here
whose docstring says which internal it reads; the rest of the harness calls these and never `warp._src`.

Checked against warp-lang 1.19.0 (the version the test suite runs); the record layout and the names used
here are the same in 1.16.0 (read from its wheel). Importing this module checks the installed version
against the range warpgrad declares (`pyproject.toml`: warp-lang>=1.19,<2) and raises
`UnsupportedWarpVersion` outside it, so an unexpected Warp fails loudly in our harness instead of as a
wrong finding about the user's code. The older Warp the version-caveat tests use (`WARPGRAD_OLD_WARP_VENV`,
1.16.0) runs plain example scripts, never the harness.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import warp as wp

SUPPORTED_MIN = (1, 19)
SUPPORTED_BELOW = (2, 0)
SUPPORTED_SPEC = "warp-lang>=1.19,<2"
"""The range `pyproject.toml` declares (tests/test_warp_compat.py keeps the two equal)."""


class UnsupportedWarpVersion(RuntimeError):
    """The installed Warp is outside the range warpgrad supports: a failure of the environment, not of the user's code."""

    kind = "unsupported_warp"


def parse_version(text: str) -> tuple[int, int] | None:
    """(major, minor) of `"1.19.0"`, `"1.20.0.dev20250101"`, `"1.12.1+cu12"`; None when unparseable."""
    m = re.match(r"\s*(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def check_version(version: str) -> None:
    """Raise `UnsupportedWarpVersion` unless `version` is in the supported range."""
    parsed = parse_version(version)
    if parsed is None or not SUPPORTED_MIN <= parsed < SUPPORTED_BELOW:
        lo, hi = ".".join(map(str, SUPPORTED_MIN)), ".".join(map(str, SUPPORTED_BELOW))
        raise UnsupportedWarpVersion(
            f"warpgrad supports warp-lang {lo}..{hi} (exclusive; {SUPPORTED_SPEC}); this is {version} "
            f"({os.path.dirname(wp.__file__)})")


check_version(wp.__version__)

# Imported only after the version check: a Warp without these modules must fail with the message above.
_context: Any = importlib.import_module("warp._src.context")


# ---------------------------------------------------------------------------------------------- runtime
def runtime_initialized() -> bool:
    """Whether `wp.init()` has run: reads `warp._src.context.runtime` (None until then)."""
    return _context.runtime is not None


def active_tape() -> Any:
    """The `wp.Tape` recording now, or None: reads `warp._src.context.runtime.tape`, which `Tape.__enter__` sets."""
    runtime = _context.runtime
    return runtime.tape if runtime is not None else None


@contextlib.contextmanager
def no_active_tape() -> Iterator[None]:
    """Run the body with no tape recording (the harness's own launches and copies stay off the user's tape).

    Sets `warp._src.context.runtime.tape` to None and puts the previous tape back afterwards.
    """
    runtime = _context.runtime
    tape, runtime.tape = runtime.tape, None
    try:
        yield
    finally:
        runtime.tape = tape


# ---------------------------------------------------------------------------------------------- patching
def internal_source_dir() -> str:
    """`warp/_src`: Warp takes the first frame outside this folder as a warning's call site."""
    return os.path.join(os.path.dirname(wp.__file__), "_src")


def context_function(name: str) -> Callable[..., Any]:
    """The function `name` (`launch`, `copy`, `capture_begin`, ...) as Warp's own code calls it.

    `wp.launch` and friends are re-exports of `warp._src.context` functions; Warp's internal callers (e.g.
    `array.assign` through `copy`) look the name up in that module, not in `warp`.
    """
    return getattr(_context, name)


def replace_context_function(name: str, fn: Callable[..., Any]) -> None:
    """Install `fn` as `wp.<name>` and as `warp._src.context.<name>`, so that both user code and Warp's
    internal callers reach it."""
    setattr(wp, name, fn)
    setattr(_context, name, fn)


def replace_to_torch(wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> bool:
    """Wrap `wp.to_torch` (defined in `warp._src.torch`); False when this Warp build lacks the module."""
    try:
        wtorch: Any = importlib.import_module("warp._src.torch")
    except ImportError:  # pragma: no cover - torch interop module missing in this Warp build
        return False
    fn = wrap(wtorch.to_torch)
    wtorch.to_torch = fn
    warp_module: Any = wp
    warp_module.to_torch = fn
    return True


def optimizer_classes() -> list[type]:
    """`SGD` and `Adam` from `warp._src.optim.sgd` / `.adam` (those present).

    The private modules, not `warp.optim`: importing that would set `wp.optim` and make a script that
    forgot `import warp.optim` work under warpgrad and fail without it.
    """
    classes = []
    for mod, name in (("warp._src.optim.sgd", "SGD"), ("warp._src.optim.adam", "Adam")):
        try:
            classes.append(getattr(importlib.import_module(mod), name))
        except (ImportError, AttributeError):
            continue
    return classes


# ---------------------------------------------------------------------------------------------- tape records
@dataclass(frozen=True)
class KernelRecord:
    """A kernel launch recorded on a tape.

    `Tape.record_launch` appends the list `[kernel, dim, max_blocks, inputs, outputs, device, block_dim,
    metadata]`; `metadata` is a dict holding `"caller"` ({file, lineno, func}) since `wp.launch` records it.
    """

    entry: list[Any]

    @property
    def kernel(self) -> Any:
        return self.entry[0]

    @property
    def dim(self) -> Any:
        return self.entry[1] if len(self.entry) > 1 else None

    @property
    def inputs(self) -> list[Any]:
        return list((self.entry[3] if len(self.entry) > 3 else None) or [])

    @property
    def outputs(self) -> list[Any]:
        return list((self.entry[4] if len(self.entry) > 4 else None) or [])

    @property
    def metadata(self) -> dict[str, Any] | None:
        meta = self.entry[7] if len(self.entry) > 7 else None
        return meta if isinstance(meta, dict) else None

    @property
    def caller(self) -> dict[str, Any]:
        """{file, lineno, func} of the launch (empty when not recorded)."""
        return (self.metadata or {}).get("caller") or {}


def tape_records(tape: Any) -> list[Any]:
    """`tape.launches`: kernel records (lists, see `KernelRecord`) and `record_func`/copy callables, in order."""
    return tape.launches


def set_tape_records(tape: Any, records: list[Any]) -> None:
    """Replace `tape.launches` (a one-launch tape replays a single record of another tape)."""
    tape.launches = records


def kernel_record(entry: Any) -> KernelRecord | None:
    """The kernel launch a tape entry records; None for a callable entry (a copy or `record_func`)."""
    return KernelRecord(entry) if isinstance(entry, list) else None


def record_closure(entry: Any) -> dict[str, Any]:
    """The closure variables of a callable tape entry (a copy records a closure over src, dest, count, ...)."""
    try:
        cells = entry.__closure__ or ()
        return dict(zip(entry.__code__.co_freevars, (c.cell_contents for c in cells)))
    except (AttributeError, ValueError):
        return {}


# ---------------------------------------------------------------------------------------------- structs, kernels
def struct_field_names(value: Any) -> list[str] | None:
    """The field names of a `wp.struct` instance (`StructInstance._cls.vars`); None for anything else."""
    vars_ = getattr(getattr(value, "_cls", None), "vars", None)
    return list(vars_) if isinstance(vars_, dict) else None


def is_struct_instance(value: Any) -> bool:
    """Whether `value` is a `wp.struct` instance (it carries its struct type as `_cls`)."""
    return hasattr(value, "_cls")


@dataclass(frozen=True)
class KernelSource:
    """Where a kernel is defined, from its `Adjoint` (`kernel.adj`)."""

    source: str
    name: str
    filename: str
    first_line: int
    globals: dict[str, Any]


def kernel_source(kernel: Any) -> KernelSource:
    """The kernel's source text and location (`kernel.adj.source`, `.fun_name`, `.filename`, `.fun_lineno`)."""
    adj = kernel.adj
    return KernelSource(adj.source, adj.fun_name, adj.filename, adj.fun_lineno,
                        getattr(kernel.func, "__globals__", {}))


def init_kernel_cache(path: str) -> None:
    """Point Warp's kernel cache at `path` in a running process (`warp._src.build.init_kernel_cache`)."""
    from warp._src import build as warp_build

    warp_build.init_kernel_cache(path)


def kernel_arg_labels(kernel: Any) -> list[str]:
    """The kernel's argument names, in order (`kernel.adj.args[i].label`)."""
    return [a.label for a in kernel.adj.args]


def kernel_arg_access(kernel: Any) -> list[tuple[bool, bool]]:
    """(read, written) per kernel argument as codegen flagged them (`Var.is_read` / `Var.is_write`).

    Codegen sets the flags only when the module is built with `verify_autograd_array_access` on.
    """
    return [(bool(getattr(a, "is_read", False)), bool(getattr(a, "is_write", False))) for a in kernel.adj.args]


def backward_state(kernel: Any) -> tuple[bool, str | None]:
    """(enabled, what disabled it: "kernel" | "module" | None), as Warp's autograd decides it.

    Reads the kernel's `options["enable_backward"]`, else its module's (`kernel.module.options`).
    """
    opts = getattr(kernel, "options", {}) or {}
    if "enable_backward" in opts:
        return bool(opts["enable_backward"]), None if opts["enable_backward"] else "kernel"
    mod_opts = getattr(getattr(kernel, "module", None), "options", {}) or {}
    enabled = bool(mod_opts.get("enable_backward", True))
    return enabled, None if enabled else "module"


# ---------------------------------------------------------------------------------------------- module builds
def module_class() -> type:
    """`warp._src.context.Module`, whose `_compile` builds one module for one device."""
    return _context.Module


def module_build_internals_present() -> bool:
    """Whether `Module` has the methods the tracker build cache calls (`_compile`, `_run_codegen`, `_get_meta_name`)."""
    return all(hasattr(_context.Module, name) for name in ("_compile", "_run_codegen", "_get_meta_name"))


def module_meta_name(module: Any, block_dim: int) -> str:
    """The file name of a built module's metadata (`Module._get_meta_name`)."""
    return module._get_meta_name(block_dim=block_dim)


def run_module_codegen(module: Any, options: dict[str, Any], is_cpu: bool) -> None:
    """Run codegen alone, as `Module._compile` does before the native compile (`Module._run_codegen`)."""
    module._run_codegen(options, is_cpu)


def load_launch_module(kernel: Any, options: dict[str, Any]) -> None:
    """Load the module a `wp.launch(kernel, ..., **options)` that is about to run would load, as the launch does
    (`Module.load(device, block_dim)` with `_resolve_launch_block_dim`; the stream's device when one is given).

    The FD hub forks inside such a launch: loading here, once, spares each forked evaluation the load; the
    launch then finds it loaded. Generic kernels (their overload is chosen from the arguments) are left to it.
    """
    if getattr(kernel, "is_generic", True):
        return
    stream = options.get("stream")
    device = stream.device if stream is not None else _context.runtime.get_device(options.get("device"))
    block_dim = _context._resolve_launch_block_dim(device, options.get("block_dim"))
    kernel.module.load(device, block_dim)
