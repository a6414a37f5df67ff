"""What the private kernel cache costs (`tools/kernel_cache.py`).

    python bench/bench_kernel_cache.py

1. Three `run_script` runs of one new program with an empty user cache: the first compiles, the next two
   load the private cache of that code (before the private cache, they loaded the user's).
2. Seeding a private cache from a user cache of 2,000 compiled modules (links, file by file): the first
   time for a version of the code, and again (nothing left to link).
3. Keying: hashing the `.py` files of this checkout.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from warpgrad.tools.kernel_cache import code_key, seed
from warpgrad.tools.run_script import RunScriptArgs, run_script

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_kernel_cache import TRAIN


def main() -> None:
    ws = Path(tempfile.mkdtemp())
    (ws / "train.py").write_text(TRAIN.replace("twice_plus_seven", f"k{os.getpid()}"), encoding="utf-8")
    os.environ["WARP_CACHE_PATH"] = tempfile.mkdtemp()
    os.environ["WARPGRAD_KERNEL_CACHE"] = tempfile.mkdtemp()
    for i in range(3):
        r = run_script(RunScriptArgs(script="train.py", record=False), ws)
        print(f"run {i}: ok={r.ok} wall_s={r.wall_s}")
    user = Path(tempfile.mkdtemp())
    for i in range(2000):
        d = user / "1.19.0" / f"wp___main___{i:07x}"
        d.mkdir(parents=True)
        for ext in (".cpp", ".cpu1.o", ".meta"):
            (d / f"m{ext}").write_bytes(b"x")
    cache = Path(tempfile.mkdtemp())
    for what in ("first", "again"):
        t = time.perf_counter()
        seed(cache, user)
        print(f"seed 2000 modules ({what}): {time.perf_counter() - t:.3f} s")
    t = time.perf_counter()
    code_key(Path(__file__).resolve().parents[1], [("train.py", [])])
    print(f"code_key of this checkout: {time.perf_counter() - t:.3f} s")


if __name__ == "__main__":
    main()
