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
import tempfile
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


def _module(root: Path, version: str, name: str, files: tuple[str, ...] = (".cpp", ".cpu1.o", ".meta")) -> Path:
    d = root / version / name
    d.mkdir(parents=True)
    for ext in files:
        (d / f"{name}{ext}").write_bytes(f"{version}/{name}{ext}".encode())
    return d


def test_a_forked_runs_cache_is_seeded_from_its_codes_cache_alone_for_its_warp_version_and_a_cpu_load(tmp_path):
    version = kernel_cache.warp_version()
    assert version is not None and version == __import__("warp").config.version  # read without importing Warp
    user, code, own = tmp_path / "user", tmp_path / "code", tmp_path / "own"
    _module(user, version, "wp___main___aaaaaaa")
    _module(user, "0.9.0", "wp___main___0ld0ld0")  # another Warp's modules: never loaded by this one
    seed(code, user)  # what `run_cache` does just before a run
    _module(code, version, "wp_warp_autograd_bbbbbbb")  # compiled by a run of this code (real files)

    assert kernel_cache.seed_run(own, code) == 4
    assert sorted(p.name for p in own.iterdir()) == [version]
    for name in ("wp___main___aaaaaaa", "wp_warp_autograd_bbbbbbb"):
        d = own / version / name
        assert d.is_dir() and not d.is_symlink()  # a real folder: Warp can still write a build into it
        assert sorted(p.name for p in d.iterdir()) == [f"{name}.cpu1.o", f"{name}.meta"]  # no source
        assert all(p.is_symlink() and p.read_bytes() == f"{version}/{p.name}".encode() for p in d.iterdir())
    # The user's module is reached through the code's cache (one source), and resolves to the user's file.
    obj = own / version / "wp___main___aaaaaaa" / "wp___main___aaaaaaa.cpu1.o"
    assert Path(os.readlink(obj)).parent == code / version / "wp___main___aaaaaaa"
    assert obj.resolve() == user / version / "wp___main___aaaaaaa" / "wp___main___aaaaaaa.cpu1.o"
    assert kernel_cache.seed_run(own, code) == 0  # seeded: what is there stays

    # A code cache without this Warp's version folder: every version is seeded (the version is a guess).
    other = tmp_path / "other"
    _module(other, "0.9.0", "wp___main___0ld0ld0")
    assert kernel_cache.seed_run(tmp_path / "own2", other) == 2


def test_run_cache_seeds_again_only_when_a_cache_or_the_users_changed(tmp_path, monkeypatch):
    ws, user, tmp = tmp_path / "ws", tmp_path / "user", tmp_path / "tmp"
    ws.mkdir()
    tmp.mkdir()
    (ws / "train.py").write_text("print(1)\n", encoding="utf-8")
    _module(user, "1.19.0", "wp___main___aaaaaaa")
    env = {"WARPGRAD_KERNEL_CACHE": str(tmp_path / "private")}
    seeds: list[Path] = []
    real_seed = kernel_cache.seed
    monkeypatch.setattr(kernel_cache, "seed", lambda cache, u: (seeds.append(cache), real_seed(cache, u)))

    def run() -> Path:
        return kernel_cache.run_cache(ws, [("train.py", [])], user, tmp, env)

    cache = run()
    assert len(seeds) == 1 and (cache / "1.19.0" / "wp___main___aaaaaaa").is_dir()
    run()
    assert len(seeds) == 1  # nothing changed: nothing to link
    time.sleep(0.02)  # a coarse file system clock: the next change gets a later modification time
    _module(user, "1.19.0", "wp___main___ccccccc")  # the user compiled another module
    run()
    assert len(seeds) == 2 and (cache / "1.19.0" / "wp___main___ccccccc").is_dir()
    time.sleep(0.02)
    for f in (cache / "1.19.0" / "wp___main___aaaaaaa").iterdir():
        f.unlink()
    (cache / "1.19.0" / "wp___main___aaaaaaa").rmdir()  # a module folder gone from the code's cache
    run()
    assert len(seeds) == 3 and (cache / "1.19.0" / "wp___main___aaaaaaa").is_dir()


def test_run_cache_prunes_old_caches_when_it_makes_a_new_one(tmp_path):
    ws, user, tmp, root = tmp_path / "ws", tmp_path / "user", tmp_path / "tmp", tmp_path / "private"
    ws.mkdir()
    tmp.mkdir()
    (ws / "train.py").write_text("print(1)\n", encoding="utf-8")
    env = {"WARPGRAD_KERNEL_CACHE": str(root)}
    kernel_cache.run_cache(ws, [("train.py", [])], user, tmp, env)
    old = _caches(root, kernel_cache.KEEP + 3, age_s=kernel_cache.GRACE_S + 60)
    kernel_cache.run_cache(ws, [("train.py", [])], user, tmp, env)  # an existing cache: their number is the same
    assert all(d.exists() for d in old)
    kernel_cache.run_cache(ws, [("train.py", ["--new"])], user, tmp, env)  # a new one: the oldest go
    assert sum(d.exists() for d in old) == kernel_cache.KEEP - 2


def test_a_forked_run_loads_what_the_user_compiled_through_its_codes_cache(tmp_path, monkeypatch):
    """The forked run's own cache links the code's cache alone, whose links lead to the user's modules: a script the
    user ran outside warpgrad compiles nothing in a forked run, and the user's cache is not written."""
    from warpgrad.tools import worker
    from warpgrad.tools.child_process import run_harness
    from warpgrad.tools.harness.protocol import HarnessResult, RunConfig

    ws, cache, private = tmp_path / "ws", tmp_path / "user-cache", tmp_path / "private"
    ws.mkdir()
    (ws / "train.py").write_text(TRAIN.replace("twice_plus_seven", "twice_plus_seven_user"), encoding="utf-8")
    assert EXPECTED in _plain_run(ws, cache)
    before = _tree(cache)
    monkeypatch.setenv("WARP_CACHE_PATH", str(cache))
    monkeypatch.setenv("WARPGRAD_KERNEL_CACHE", str(private))
    cfg = RunConfig(workspace=str(ws), script=str(ws / "train.py"), device="cpu")
    with worker.worker_pool() as pool:
        assert pool is not None
        out = run_harness(cfg, HarnessResult, cwd=ws, device="cpu")
        assert pool.served == 1
    assert out.process.returncode == 0 and out.result is not None, out.process.stderr_tail
    assert EXPECTED in out.process.stdout_tail
    assert out.result.compiled_modules == []
    assert _tree(cache) == before


def _need_link_atime(folder: Path) -> None:
    """The list of loaded modules reads links' access times; a file system mounted `noatime` never moves them (and
    then no list is started: every module is seeded, as the fallback tests show)."""
    probe = Path(tempfile.mkdtemp(dir=folder))
    target, link = probe / "target", probe / "link"
    target.write_bytes(b"x")
    link.symlink_to(target)
    time.sleep(0.05)
    link.read_bytes()
    st = link.lstat()
    link.unlink()
    target.unlink()
    probe.rmdir()
    if st.st_atime_ns <= st.st_mtime_ns:
        pytest.skip(f"{folder} does not update a link's access time when followed (noatime?)")


def test_a_forked_run_notes_the_modules_it_loaded_and_only_those_are_seeded_next(tmp_path):
    """`harvest` lists the modules a forked run followed a link of (Linux sets a link's access time when a path
    through it is resolved) or compiled; later runs of the code seed those, Warp's own and what this code
    compiled, not the user's other programs. Nothing read, no list: every module is seeded."""
    _need_link_atime(tmp_path)
    user, code = tmp_path / "user", tmp_path / "private" / "key"
    for name in ("wp___main___aaaaaaa", "wp___main___ccccccc", "wp_mylib.sim_1111111", "wp_warp.autograd_2222222"):
        _module(user, "1.19.0", name)
    seed(code, user)
    _module(code, "1.19.0", "wp_tracker_3333333")  # compiled by a run of this code
    run = tmp_path / "run"
    kernel_cache.seed_run(run, code)
    assert len(list((run / "1.19.0").iterdir())) == 5
    time.sleep(0.05)  # the access must fall on a later tick of the file system clock than the link's making
    kernel_cache.harvest(run, code)
    assert not kernel_cache.loaded_path(code).exists()  # nothing was loaded: no list, everything stays seeded

    (run / "1.19.0" / "wp___main___aaaaaaa" / "wp___main___aaaaaaa.meta").read_bytes()  # what Warp's load does
    (run / "1.19.0" / "wp_mylib.sim_1111111" / "wp_mylib.sim_1111111.cpu1.o").stat()
    kernel_cache.harvest(run, code)
    listed = kernel_cache.loaded_path(code).read_text(encoding="utf-8").split()
    assert listed == ["wp___main___aaaaaaa", "wp_mylib.sim_1111111"]  # the code's own builds are seeded anyway

    _module(user, "1.19.0", "wp_mylib.sim_4444444")  # another build of a module name the code loads
    seed(code, user)
    nxt = tmp_path / "next"
    kernel_cache.seed_run(nxt, code)
    assert sorted(p.name for p in (nxt / "1.19.0").iterdir()) == [
        "wp___main___aaaaaaa", "wp_mylib.sim_1111111", "wp_mylib.sim_4444444", "wp_tracker_3333333",
        "wp_warp.autograd_2222222"]  # not `wp___main___ccccccc`, another program's


def test_a_module_a_forked_run_needed_but_was_not_seeded_is_compiled_in_its_own_cache_and_seeded_next(
        tmp_path, monkeypatch):
    from warpgrad.tools import worker
    from warpgrad.tools.child_process import run_harness
    from warpgrad.tools.harness.protocol import HarnessResult, RunConfig

    _need_link_atime(Path(tempfile.gettempdir()))  # where the worker's runs keep their own caches
    ws, cache, private = tmp_path / "ws", tmp_path / "user-cache", tmp_path / "private"
    ws.mkdir()
    (ws / "train.py").write_text(TRAIN.replace("twice_plus_seven", "twice_plus_seven_listed"), encoding="utf-8")
    assert EXPECTED in _plain_run(ws, cache)
    before = _tree(cache)
    monkeypatch.setenv("WARP_CACHE_PATH", str(cache))
    monkeypatch.setenv("WARPGRAD_KERNEL_CACHE", str(private))
    cfg = RunConfig(workspace=str(ws), script=str(ws / "train.py"), device="cpu")
    listed = kernel_cache.loaded_path(private / code_key(ws, [("train.py", [])], cache))
    compiled = []
    with worker.worker_pool() as pool:
        assert pool is not None
        for i in range(3):
            if i == 1:  # the list names another module only: the script's is not seeded in the next run
                assert [n for n in listed.read_text(encoding="utf-8").split() if n.startswith("wp___main__")]
                listed.write_text("wp___main___0000000\n", encoding="utf-8")
            out = run_harness(cfg, HarnessResult, cwd=ws, device="cpu")
            assert out.process.returncode == 0 and out.result is not None, out.process.stderr_tail
            assert EXPECTED in out.process.stdout_tail
            compiled.append(out.result.compiled_modules)
        assert pool.served == 3
    assert compiled == [[], ["__main__"], []]  # linked; compiled (not seeded), noted; linked again
    assert _tree(cache) == before


def test_a_patched_codes_first_forked_run_seeds_what_runs_of_its_workspace_loaded(tmp_path):
    _need_link_atime(tmp_path)
    user, root, ws = tmp_path / "user", tmp_path / "private", tmp_path / "ws"
    for name in ("wp___main___aaaaaaa", "wp___main___ccccccc"):
        _module(user, "1.19.0", name)
    before, after = root / "key-before", root / "key-after-a-patch"
    seed(before, user)
    seed(after, user)
    run = tmp_path / "run"
    kernel_cache.seed_run(run, before, ws)
    time.sleep(0.05)
    (run / "1.19.0" / "wp___main___aaaaaaa" / "wp___main___aaaaaaa.meta").read_bytes()
    kernel_cache.harvest(run, before, workspace=ws)
    assert kernel_cache.workspace_loaded_path(root, ws).read_text(encoding="utf-8") == "wp___main___aaaaaaa\n"
    assert not kernel_cache.loaded_path(after).exists()
    kernel_cache.seed_run(tmp_path / "patched", after, ws)
    assert [p.name for p in (tmp_path / "patched" / "1.19.0").iterdir()] == ["wp___main___aaaaaaa"]
    kernel_cache.seed_run(tmp_path / "elsewhere", after, tmp_path / "another-workspace")
    assert len(list((tmp_path / "elsewhere" / "1.19.0").iterdir())) == 2  # no list: everything
