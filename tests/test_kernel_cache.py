"""A sandboxed run cannot change what anyone loads from a Warp kernel cache afterwards.

The cache holds compiled objects Warp runs unchecked: a run that could write the user's cache would run
code outside the sandbox at the user's next plain `python train.py`, and forge the numbers of warpgrad's
later runs. Each run gets its own cache, seeded from the user's read-only (`tools/kernel_cache.py`).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from warpgrad.tools import kernel_cache
from warpgrad.tools.kernel_cache import code_key, private_root, seed
from warpgrad.tools.run_script import RunScriptArgs, run_script
from warpgrad.tools.sandbox import detect_isolation

pytestmark = pytest.mark.warp

# A program of its own (its module hash is new to every cache): doubles an array and prints its sum.
TRAIN = """\
import warp as wp

@wp.kernel
def twice_plus_seven(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i] + 7.0

x = wp.array([1.0, 2.0, 3.0], dtype=float, device="cpu")
y = wp.zeros(3, dtype=float, device="cpu")
wp.launch(twice_plus_seven, dim=3, inputs=[x], outputs=[y], device="cpu")
print("sum", float(y.numpy().sum()))
"""
EXPECTED = "sum 33.0"

# Overwrites every cached kernel object it can reach (the user's cache by the path it knows, its own
# cache by WARP_CACHE_PATH) with garbage, and plants a module folder for a hash of its own.
ATTACK = """\
import os, sys
hit = {}
for root in sys.argv[1:] + [os.environ.get("WARP_CACHE_PATH", "")]:
    for dirpath, dirs, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            try:
                with open(p, "wb") as out:
                    out.write(b"\\x7fELF planted")
                hit[p] = "written"
            except OSError as e:
                hit[p] = e.strerror
            try:
                os.unlink(p)
                os.symlink("/tmp/planted.o", p)
                hit[p] += "+relinked"
            except OSError:
                pass
    try:
        os.makedirs(os.path.join(root, "1.19.0", "wp___main___deadbee"), exist_ok=True)
        open(os.path.join(root, "1.19.0", "wp___main___deadbee", "x.o"), "wb").write(b"planted")
    except OSError:
        pass
print(sorted(set(hit.values())))
"""


@pytest.fixture(autouse=True)
def isolated_caches(monkeypatch):
    """These tests are about the isolation that the suite's trusted shared cache turns off."""
    monkeypatch.delenv("WARPGRAD_SHARED_KERNEL_CACHE", raising=False)


def _need_bwrap() -> None:
    info = detect_isolation("auto")
    if info.isolation != "bwrap":
        if os.environ.get("CI"):
            pytest.fail("bwrap must be usable in CI: " + info.reason)
        pytest.skip("bwrap unusable here: " + info.reason)


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _plain_run(ws: Path, cache: Path) -> str:
    """`python train.py` outside warpgrad, with the user's cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARPGRAD")} | {"WARP_CACHE_PATH": str(cache)}
    out = subprocess.run([sys.executable, "train.py"], check=False, cwd=ws, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_a_run_that_overwrites_cached_kernels_changes_nothing_a_later_run_loads(tmp_path, monkeypatch):
    _need_bwrap()
    monkeypatch.setenv("WARPGRAD_SANDBOX", "bwrap")
    ws, cache, private = tmp_path / "ws", tmp_path / "user-cache", tmp_path / "private"
    ws.mkdir()
    (ws / "train.py").write_text(TRAIN, encoding="utf-8")
    (ws / "attack.py").write_text(ATTACK, encoding="utf-8")
    assert EXPECTED in _plain_run(ws, cache)  # the user's cache now holds the compiled kernel
    before = _tree(cache)
    assert any(name.endswith(".o") for name in before)
    monkeypatch.setenv("WARP_CACHE_PATH", str(cache))
    monkeypatch.setenv("WARPGRAD_KERNEL_CACHE", str(private))

    first = run_script(RunScriptArgs(script="train.py", record=False), ws)
    assert first.ok and EXPECTED in first.stdout_tail, first.error
    train_key = code_key(ws, [("train.py", [])], cache)
    ours = _tree(private / train_key)
    attack = run_script(RunScriptArgs(script="attack.py", args=[str(cache), str(private)], record=False), ws)
    assert attack.ok, attack.error

    assert _tree(cache) == before  # not one byte of the user's cache changed, nothing planted
    assert _tree(private / train_key) == ours  # nor of the cache runs of train.py load
    assert EXPECTED in _plain_run(ws, cache)
    later = run_script(RunScriptArgs(script="train.py", record=False), ws)
    assert later.ok and EXPECTED in later.stdout_tail, later.error


def test_the_private_cache_is_per_version_of_the_code_and_seeded_with_links_in_folders_of_its_own(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "train.py").write_text("import lib\n", encoding="utf-8")
    (ws / "lib.py").write_text("X = 1\n", encoding="utf-8")
    key = code_key(ws, [(str(ws / "train.py"), [])])
    assert key == code_key(ws, [("train.py", [])])  # the same code, however the script is named
    assert code_key(ws, [("train.py", ["--fast"])]) != key
    assert code_key(ws, [("lib.py", [])]) != key
    assert code_key(ws, [("train.py", [])], tmp_path / "another-user-cache") != key
    (ws / "lib.py").write_text("X = 2\n", encoding="utf-8")  # a patch: a cache of its own
    assert code_key(ws, [("train.py", [])]) != key
    assert private_root({"WARPGRAD_KERNEL_CACHE": str(tmp_path / "p")}) == tmp_path / "p"
    assert private_root({"HOME": "/home/u"}) == Path("/home/u/.cache/warpgrad/kernels")

    user = tmp_path / "user"
    mod = user / "1.19.0" / "wp___main___abc1234"
    mod.mkdir(parents=True)
    (mod / "wp___main___abc1234.cpu1.o").write_bytes(b"obj")
    (mod / "wp___main___abc1234.meta").write_text("{}", encoding="utf-8")
    (user / "1.19.0" / "wp___main___abc1234_p12_t34").mkdir()  # half-built by a process that died
    (user / "1.19.0" / "wp_linked").symlink_to(mod)
    cache = tmp_path / "cache"
    cache.mkdir()
    seed(cache, user)
    seed(cache, user)  # again: what is there stays
    seeded = cache / "1.19.0" / "wp___main___abc1234"
    assert sorted(p.name for p in (cache / "1.19.0").iterdir()) == ["wp___main___abc1234"]
    assert seeded.is_dir() and not seeded.is_symlink()
    assert all(p.is_symlink() and p.resolve().parent == mod for p in seeded.iterdir())
    assert (seeded / "wp___main___abc1234.cpu1.o").read_bytes() == b"obj"


def test_runs_forked_from_a_worker_cannot_plant_kernels_for_each_other(tmp_path, monkeypatch):
    from warpgrad.tools import worker

    _need_bwrap()
    monkeypatch.setenv("WARPGRAD_SANDBOX", "bwrap")
    ws, cache, private = tmp_path / "ws", tmp_path / "user-cache", tmp_path / "private"
    ws.mkdir()
    (ws / "train.py").write_text(TRAIN, encoding="utf-8")
    (ws / "attack.py").write_text(ATTACK, encoding="utf-8")
    monkeypatch.setenv("WARP_CACHE_PATH", str(cache))
    monkeypatch.setenv("WARPGRAD_KERNEL_CACHE", str(private))
    with worker.worker_pool() as pool:
        assert pool is not None
        first = run_script(RunScriptArgs(script="train.py", record=False, device="cpu"), ws)
        assert first.ok and EXPECTED in first.stdout_tail, first.error
        # The attack knows where the worker's runs keep their caches: the scratch folder they all share.
        attack = run_script(RunScriptArgs(script="attack.py", args=[str(cache), str(private), str(pool.scratch)],
                                          record=False, device="cpu"), ws)
        assert attack.ok, attack.error
        later = run_script(RunScriptArgs(script="train.py", record=False, device="cpu"), ws)
        assert later.ok and EXPECTED in later.stdout_tail, later.error
        assert pool.served == 3


def test_what_a_forked_run_compiles_lands_in_its_codes_cache_and_the_next_forked_run_loads_it(tmp_path, monkeypatch):
    """A run forked from a worker compiles into a cache of its own that dies with it; its builds are handed to
    the cache of its code (`kernel_cache.harvest`), so the next run of that code, forked or fresh, loads them
    instead of compiling again (the tracker's builds and Warp's own modules used to compile in every diagnose)."""
    from warpgrad.tools import worker
    from warpgrad.tools.child_process import run_harness
    from warpgrad.tools.harness.protocol import HarnessResult, RunConfig

    ws, cache, private = tmp_path / "ws", tmp_path / "user-cache", tmp_path / "private"
    ws.mkdir()
    (ws / "train.py").write_text(TRAIN, encoding="utf-8")
    (ws / "attack.py").write_text(ATTACK, encoding="utf-8")
    monkeypatch.setenv("WARP_CACHE_PATH", str(cache))  # empty: the user never ran train.py
    monkeypatch.setenv("WARPGRAD_KERNEL_CACHE", str(private))
    cfg = RunConfig(workspace=str(ws), script=str(ws / "train.py"), device="cpu")
    compiled = []
    with worker.worker_pool() as pool:
        assert pool is not None
        for _ in range(2):
            out = run_harness(cfg, HarnessResult, cwd=ws, device="cpu")
            assert out.process.returncode == 0 and out.result is not None, out.process.stderr_tail
            assert EXPECTED in out.process.stdout_tail
            compiled.append(out.result.compiled_modules)
        assert pool.served == 2
        # A script that plants a module folder in its own cache plants it for its own code only.
        attack = run_script(RunScriptArgs(script="attack.py", args=[str(cache), str(private)], record=False,
                                          device="cpu"), ws)
        assert attack.ok, attack.error
    assert compiled == [["__main__"], []]  # the second run loaded the first one's build
    ours = private / code_key(ws, [("train.py", [])], cache)
    built = [m for v in ours.iterdir() for m in v.iterdir() if m.name.startswith("wp___main__")]
    assert built and all(f.is_file() and not f.is_symlink() for m in built for f in m.iterdir())
    assert not any(m.name == "wp___main___deadbee" for v in ours.iterdir() for m in v.iterdir())
    assert not cache.exists() or not any(cache.rglob("*.o"))  # the user's cache is never written


def _caches(root: Path, n: int, age_s: float) -> list[Path]:
    """`n` cache folders under `root`, the i-th last used `age_s + i` seconds ago (0 is the newest)."""
    now = time.time()
    made = []
    for i in range(n):
        d = root / f"key{i:03d}"
        d.mkdir(parents=True)
        os.utime(d, (now - age_s - i, now - age_s - i))
        made.append(d)
    return made


def test_prune_keeps_the_most_recent_and_spares_caches_in_use(tmp_path: Path) -> None:
    old = _caches(tmp_path / "old", 6, age_s=24 * 3600)
    kernel_cache.prune(tmp_path / "old", keep=2)
    assert [d.exists() for d in old] == [True, True, False, False, False, False]
    # Used within the grace period: a long run may still load from it, so it stays whatever `keep` says.
    recent = _caches(tmp_path / "recent", 6, age_s=60)
    kernel_cache.prune(tmp_path / "recent", keep=2)
    assert all(d.exists() for d in recent)


def test_concurrent_prunes_do_not_fail_on_each_others_removals(tmp_path: Path) -> None:
    # Runs prune concurrently (`eval --jobs 2`); a folder one removes between another's listing and its stat
    # used to raise FileNotFoundError and crash that run (a verdict that changed between two runs).
    errors: list[BaseException] = []

    def prune_all() -> None:
        try:
            kernel_cache.prune(tmp_path, keep=0, grace_s=0)
        except BaseException as e:  # noqa: BLE001 - the test reports whatever a prune raised
            errors.append(e)

    for _ in range(5):
        _caches(tmp_path, 200, age_s=10)
        threads = [threading.Thread(target=prune_all) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert list(tmp_path.iterdir()) == []


def test_the_trusted_shared_cache_is_off_unless_set_and_made_private_when_missing(tmp_path):
    from warpgrad.tools.kernel_cache import SHARED_ENV, shared_cache

    assert shared_cache({}) is None and shared_cache({SHARED_ENV: ""}) is None
    target = tmp_path / "a" / "shared"
    assert shared_cache({SHARED_ENV: str(target)}) == target and target.is_dir()
    assert target.stat().st_mode & 0o777 == 0o700
