import os
import tempfile
from pathlib import Path

# Every Warp subprocess the tests start shares one kernel cache, so modules compile once per run.
os.environ.setdefault("WARP_CACHE_PATH", str(Path(tempfile.gettempdir()) / "warpgrad-test-kernel-cache"))

# warpgrad's private kernel caches (one per version of the code a run starts) outside the user's home.
os.environ.setdefault("WARPGRAD_KERNEL_CACHE", str(Path(tempfile.gettempdir()) / "warpgrad-test-private-kernels"))

# The ledger signing key lives outside every workspace; tests use their own, never the user's real one.
os.environ.setdefault("WARPGRAD_KEY_DIR", tempfile.mkdtemp(prefix="warpgrad-test-key-"))
