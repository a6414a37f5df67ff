"""Reuse the tracker's module builds across runs: codegen again, skip the native compile.

With `wp.config.verify_autograd_array_access` on, Warp rebuilds every module on every run, cached
binary or not (warp-facts §2.4), because the tracker's evidence comes out of *codegen*: the per-argument
read/write flags the launch-side tracking reads, and the within-kernel warnings. The native compile that
follows (the dominant cost, ~1.5 s a module on CPU) only reproduces a binary that is already in the
cache: tracker builds have their own module hash (the flag is one of the hashed options), so that binary
was itself built with the flag, from the same source.

`install()` wraps `Module._compile` in the harness process of a tracker run: when the flag is on and
the binary and its metadata for this module hash already exist, it runs the codegen window alone (flags
set, warnings logged, exactly as a full build) and reports the module as compiled, which it is in every
respect but the native step (so Warp does not run the adjoint build a second time for its metadata, which
would log the within-kernel warnings twice); otherwise it builds as Warp would. The modules served this
way are listed in `REUSED`. Nothing changes for runs without the flag.
"""

from __future__ import annotations

import os
from typing import Any

_MARK = "_warpgrad_tracker_cache"
REUSED: list[str] = []
"""Modules whose tracker build came from the cache in this process (reported by the tracker listener)."""


def install() -> bool:
    """Wrap `Module._compile`; False (and nothing patched) when this Warp lacks the internals used."""
    import warp

    from . import warp_compat

    if not warp_compat.module_build_internals_present():
        return False
    module_cls: Any = warp_compat.module_class()
    original = module_cls._compile
    if getattr(original, _MARK, False):
        return True

    def _compile(self: Any, device: Any = None, output_dir: Any = None, output_name: str | None = None,
                 output_arch: int | None = None, use_ptx: bool | None = None, options: dict | None = None) -> bool:
        cached = (
            options is not None
            and options.get("verify_autograd_array_access", False)
            and warp.config.cache_kernels
            and output_dir is not None
            and output_name is not None
            and os.path.exists(os.path.join(output_dir, output_name))
            and os.path.exists(os.path.join(output_dir, warp_compat.module_meta_name(self, options["block_dim"])))
        )
        if not cached or options is None:
            return original(self, device, output_dir, output_name, output_arch, use_ptx, options)
        # The codegen window as `_compile` runs it (same options, same target): it sets the argument
        # flags and logs the within-kernel warnings; its source is discarded (the binary is the cached one).
        warp_compat.run_module_codegen(self, options | {"output_arch": output_arch}, output_arch is None)
        REUSED.append(self.name)
        return True

    setattr(_compile, _MARK, True)
    module_cls._compile = _compile
    return True
