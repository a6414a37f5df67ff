import os
import tempfile
from pathlib import Path

# Every Warp subprocess the tests start shares one kernel cache, so modules compile once per run.
os.environ.setdefault("WARP_CACHE_PATH", str(Path(tempfile.gettempdir()) / "warpgrad-test-kernel-cache"))

# warpgrad's private kernel caches (one per version of the code a run starts) outside the user's home.
os.environ.setdefault("WARPGRAD_KERNEL_CACHE", str(Path(tempfile.gettempdir()) / "warpgrad-test-private-kernels"))

# Trusted mode for the suite's own programs: every run writes one shared kernel cache, so a module compiles once
# per test session instead of once per run (`tools/kernel_cache.shared_cache`). The tests of the cache's
# isolation (tests/test_kernel_cache.py, the bwrap test in tests/test_sandbox.py) unset it.
os.environ.setdefault("WARPGRAD_SHARED_KERNEL_CACHE", str(Path(tempfile.gettempdir()) / "warpgrad-test-shared-kernels"))

# The ledger signing key lives outside every workspace; tests use their own, never the user's real one.
os.environ.setdefault("WARPGRAD_KEY_DIR", tempfile.mkdtemp(prefix="warpgrad-test-key-"))

# The CLI's warm server (cli/warm) stays off in the suite: a test's command must not leave a process behind nor run
# in a server another test started. tests/test_warm_server.py turns it on, with a state folder of its own.
os.environ.setdefault("WARPGRAD_SERVER", "0")
