"""The Warp kernel cache a sandboxed run writes: warpgrad's own, one per version of the code, seeded read-only
from the user's.

Warp loads a compiled kernel object from its cache (`<WARP_CACHE_PATH>/<version>/wp_<module>_<hash>/`) and
runs it unchecked. A cache user code can write is code execution wherever it is loaded next: the user's
own `python train.py` outside warpgrad, or a later warpgrad run that checks the patched code and would
report the numbers a planted object computes. So:

- A run never writes the user's cache (under bwrap it lies on the read-only root, and is bound read-only
  over any writable bind it lies in). Nothing compiled inside the sandbox is loaded outside it.
- A run writes warpgrad's private cache for *its code*: `<root>/<key>/`, where the key hashes every `.py`
  file of the workspace and the script and arguments the run starts. A run loads only what runs of the
  same code compiled: code that plants an object poisons only its own later runs, which run the same
  planting code anyway. Any change to the workspace's Python (a patch) gets a fresh cache, so a check of
  patched code never loads what an earlier version compiled. A workspace too large to hash quickly
  (`MAX_FILES`, `MAX_BYTES`) gets a cache per run instead (in the run's temp dir; no sharing at all).
- Every cache is seeded with the user's compiled modules as links, file by file, into folders of its own:
  a module the user already compiled loads at once; one Warp must compile lands beside the links.

Runs forked from a warm worker share one sandbox, so they write neither: each gets a cache of its own in
its temp dir, seeded from its code's (`seed_run`; the code's cache already links the user's modules), for the
one Warp version and the files a CPU load reads. After the run, the parent (outside the sandbox) copies what it
compiled into its code's cache (`harvest`), as a fresh run of that code would have written it, so the next run
of the same code does not compile it again.

Seeding costs a folder and a link per file for every module, in every run: the count of file system entries
made is what is cut (a reseed that would make none is skipped, `run_cache`). A module folder is never a link to
a folder: Warp writes into an existing module folder when it lacks the binary for the run's options
(`os.rename(build_dir, module_dir)` fails with ENOTDIR on a link and Warp raises), so each stays a real folder.
Hard links are never used: one in a writable folder would make the user's file writable through it. Once
forked runs of a code (or of its workspace) have loaded modules, `harvest` lists them beside its cache, out of
every run's reach, and later forked runs seed those and a few more (`seed_run`), not the user's other programs.
The list only chooses among the code's cache's own modules: a module a seed leaves out is compiled into the
run's own cache (and listed), never loaded from anywhere else.

The root is `WARPGRAD_KERNEL_CACHE`, else `warpgrad/kernels` under the user's cache dir; it keeps the
`KEEP` most recently used caches. Without bwrap (the fallback) none of this holds against a hostile
script: it can write the user's cache and every private one directly.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
import re
import shutil
import stat
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

ROOT_ENV = "WARPGRAD_KERNEL_CACHE"
SHARED_ENV = "WARPGRAD_SHARED_KERNEL_CACHE"
RUN_CACHE_DIR = "warp-kernels"
MAX_FILES = 5000
MAX_BYTES = 64 * 2**20
KEEP = 32
GRACE_S = 6 * 3600.0  # a cache used this recently is kept whatever KEEP says (see `prune`)
_BUILDING = re.compile(r"_p\d+_t\d+$")  # Warp's half-built folders: `<module>_p<pid>_t<thread>`
_SKIP_DIRS = frozenset({"__pycache__", "site-packages", "dist-packages", "node_modules", "venv", ".venv"})


def shared_cache(env: Mapping[str, str]) -> Path | None:
    """Trusted mode (`WARPGRAD_SHARED_KERNEL_CACHE=DIR`): one cache every run writes and loads, fresh or forked
    from a worker, so each module compiles once across all runs, as before the isolation above. It gives up
    that isolation (a script can plant compiled code every later run loads), so it is for code you trust:
    warpgrad's own test suite sets it; the kernel-cache tests unset it. None when not set."""
    value = env.get(SHARED_ENV)
    if not value:
        return None
    path = Path(value).expanduser()
    # Every run asks for it (a predicate too: "is trusted mode on?"): the folder is made when it is missing only,
    # not with a mkdir per call.
    if not path.is_dir():
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def private_root(env: Mapping[str, str]) -> Path:
    """Where warpgrad keeps its kernel caches (outside every workspace)."""
    if env.get(ROOT_ENV):
        return Path(env[ROOT_ENV]).expanduser()
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base).expanduser() / "warpgrad" / "kernels"


def code_key(workspace: Path, starts: Iterable[tuple[str | None, list[str]]], seeded_from: Path | None = None
             ) -> str | None:
    """sha256 of the workspace's `.py` files (path and content), of the (script, args) the run starts and of the
    user cache the private one is seeded from (another user cache, another private one); None when the
    workspace holds more Python than MAX_FILES / MAX_BYTES (then nothing is shared)."""
    h = hashlib.sha256(f"{seeded_from.resolve() if seeded_from is not None else ''}\0".encode())
    files, size = 0, 0
    for dirpath, dirs, names in os.walk(workspace):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
        for name in sorted(n for n in names if n.endswith(".py")):
            p = Path(dirpath) / name
            if p.is_symlink() or not p.is_file():
                continue
            data = p.read_bytes()
            files, size = files + 1, size + len(data)
            if files > MAX_FILES or size > MAX_BYTES:
                return None
            h.update(f"{p.relative_to(workspace).as_posix()}\0{len(data)}\0".encode())
            h.update(data)
    for script, args in sorted((_relative(workspace, s), list(a)) for s, a in starts):
        h.update(f"\0start\0{script}\0{args!r}".encode())
    return h.hexdigest()[:32]


def _relative(workspace: Path, script: str | None) -> str:
    """The script as the workspace names it: the same code in another folder has the same key."""
    if not script:
        return ""
    p = Path(script)
    return p.relative_to(workspace).as_posix() if p.is_absolute() and p.is_relative_to(workspace) else script


def seed(cache: Path, user_cache: Path) -> None:
    """Link every compiled module of `user_cache` that `cache` lacks, file by file, into folders of `cache`'s
    own. Only real folders and files are linked (a link in the user's cache is skipped)."""
    if not user_cache.is_dir():
        return
    for version, module in _module_folders(user_cache):
        _link_module(cache / version / module.name, module.path, links=False, skip=())


# A forked run never uses CUDA (`worker.WorkerPool._key`), and Warp's CPU load reads the module's `.meta` and
# its object alone: its sources and CUDA binaries need no link. Left out, they cost nothing but a write Warp
# makes when it compiles the module anyway (into the run's own folder).
_NOT_LOADED_ON_CPU = (".cpp", ".cu", ".ptx", ".cubin", ".fatbin")


def seed_run(cache: Path, code_cache: Path, workspace: Path | None = None) -> int:
    """Seed the own cache of a run forked from a worker (`worker._own_kernel_cache`) from its code's cache alone:
    that one already links the user's modules (`run_cache` seeds it just before) and holds what runs of the code
    compiled. Its links are linked in turn (to the code cache's entry, which the run reads but cannot write),
    its real files too; only the Warp version the run imports (`warp_version`, every version when unknown) and
    the files a CPU load reads.

    Once forked runs of this code have loaded modules (`loaded_path`, written by `harvest`), only those are
    seeded, with every module compiled by a run of this code (a folder holding a regular file), every one of
    Warp's own (`wp_warp.*`: which of them a run loads depends on its mode) and every build of a module name
    a run loaded (but `__main__`, which every script has): the user's cache holds the modules of every
    program they ran, this code loads a few. A module left out that a run needs is compiled into its own
    cache, and noted then, so the next run seeds it. A code without a list yet (the first runs after a patch)
    takes the list of its `workspace` (`workspace_loaded_path`: what runs of its earlier versions loaded), which
    `harvest` extends too. Returns the number of links made."""
    if not code_cache.is_dir() or cache == code_cache:
        return 0
    version = warp_version()
    versions = [version] if version is not None and (code_cache / version).is_dir() else None
    loaded = _read_loaded(loaded_path(code_cache))
    if loaded is None and workspace is not None:
        loaded = _read_loaded(workspace_loaded_path(code_cache.parent, workspace))
    names = {_module_name(m) for m in loaded or ()} - {"__main__", None}
    made = 0
    for v, module in _module_folders(code_cache, versions):
        if loaded is not None and module.name not in loaded and not module.name.startswith("wp_warp.") \
                and _module_name(module.name) not in names and not _holds_a_file(module.path):
            continue
        made += _link_module(cache / v / module.name, module.path, links=True, skip=_NOT_LOADED_ON_CPU)
    return made


LOADED_SUFFIX = ".loaded"
MAX_LOADED = 4096  # a run can add any name to its code's list (it costs only links): not without bound
_MODULE_FOLDER = re.compile(r"wp_(.+)_[0-9a-f]+")


WORKSPACE_LIST_MAX_AGE_S = 30 * 86400  # a workspace list not extended for this long is pruned


def workspace_loaded_path(root: Path, workspace: Path) -> Path:
    """The list of the modules forked runs of any version of the code in `workspace` loaded (`loaded_path`)."""
    digest = hashlib.sha256(str(Path(workspace).resolve()).encode()).hexdigest()[:32]
    return root / f"ws-{digest}{LOADED_SUFFIX}"


def loaded_path(code_cache: Path) -> Path:
    """The list of the module folders forked runs of this code loaded or compiled, one name a line: beside its
    cache in the private root, which no run can write (only its cache is bound writable)."""
    return code_cache.with_name(code_cache.name + LOADED_SUFFIX)


def _module_name(folder: str) -> str | None:
    """The Python module a module folder was built from (`wp_<module>_<hash>`)."""
    m = _MODULE_FOLDER.fullmatch(folder)
    return m.group(1) if m else None


def _read_loaded(path: Path) -> set[str] | None:
    """The folder names of `path` (`loaded_path`); None when there is none (then everything is seeded)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    names = {n for n in text.splitlines() if _module_name(n) and "/" not in n and "\0" not in n}
    return names or None


def _holds_a_file(folder: str) -> bool:
    with os.scandir(folder) as files:
        return any(f.is_file(follow_symlinks=False) for f in files)


def _record_loaded(run_cache: Path, into: Path, workspace: Path | None) -> set[str]:
    """Add to the list of `into`'s code (`loaded_path`), and to that of its `workspace` when given, the modules a forked run loaded from its seeded links and those it compiled (a folder holding a regular
    file); returns those seen.

    Loaded: Linux sets a link's access time when a path through it is resolved (under the default `relatime`
    too: the first access after the link was made), and the run follows a module's links to load it, so one
    accessed after it was made (`seed_run`, before the run) was loaded. On a file system mounted `noatime`
    no link shows it: the list is then never started (only a link seen loaded starts it), and every run
    seeds every module as before. What the run did to its own cache can only add names (more links)."""
    seen: set[str] = set()
    accessed = False
    try:
        for _, module in _module_folders(run_cache):
            with os.scandir(module.path) as files:
                for f in files:
                    st = f.stat(follow_symlinks=False)
                    link = stat.S_ISLNK(st.st_mode)
                    if not link or st.st_atime_ns > st.st_mtime_ns:
                        seen.add(module.name)
                        accessed = accessed or link
                        break
    except OSError:
        return set()  # a cache changing under the scan (a process the run left behind): note nothing
    ws_list = None if workspace is None else workspace_loaded_path(into.parent, workspace)
    for path in [loaded_path(into), *([ws_list] if ws_list is not None else [])]:
        _add_loaded(path, seen, start=accessed)
    return seen


def _add_loaded(path: Path, seen: set[str], *, start: bool) -> None:
    """Add `seen` to the list at `path`; a missing list is started only when `start`."""
    with _LOADED_LOCK:  # this process's runs end in threads of their own: no list loses another's names
        old = _read_loaded(path)
        if not seen or (old is None and not start) or (old is not None and seen <= old):
            return
        names = sorted((old or set()) | seen)[:MAX_LOADED]
        part = path.with_name(f"{path.name}_p{os.getpid()}_t{threading.get_ident()}")
        try:
            part.write_text("".join(f"{n}\n" for n in names), encoding="utf-8")
            os.replace(part, path)  # whole or not at all: a concurrent seed never reads half a list
        except OSError:
            part.unlink(missing_ok=True)


_LOADED_LOCK = threading.Lock()


def _link_module(dest: Path, source: str, *, links: bool, skip: tuple[str, ...]) -> int:
    """Make `dest` a folder of links to the files of the module folder `source` (its links too when `links`;
    none whose name ends with one of `skip`); nothing when `dest` exists (seeded before, or compiled by a run
    of this code). Returns the number of links made."""
    try:
        dest.mkdir(parents=True)
    except FileExistsError:
        return 0
    made = 0
    for f in os.scandir(source):
        if f.name.endswith(skip) or not (f.is_file(follow_symlinks=False) or (links and f.is_symlink())):
            continue
        with contextlib.suppress(FileExistsError):
            os.symlink(f.path, dest / f.name)
            made += 1
    return made


@functools.cache
def warp_version() -> str | None:
    """The version folder Warp names in its cache (`warp.config.version`) for the Warp this interpreter imports,
    read from its `config.py` without importing it (the CLI never imports Warp); None when not found."""
    try:
        spec = importlib.util.find_spec("warp")
        origin = spec.origin if spec is not None else None
        text = (Path(origin).parent / "config.py").read_text(encoding="utf-8") if origin else ""
    except (ImportError, ValueError, OSError):
        return None
    found = re.search(r'^version\s*:\s*str\s*=\s*"([^"/\\]+)"', text, re.MULTILINE)
    return found.group(1) if found else None


def _module_folders(cache: Path, versions: Iterable[str] | None = None) -> Iterator[tuple[str, os.DirEntry]]:
    """(Warp version folder name, module folder) for every compiled module folder of `cache` (of the version
    folders named in `versions`, else of all): real folders named `wp_*`, none that Warp is still building
    (`_p<pid>_t<thread>`)."""
    wanted = None if versions is None else set(versions)
    for version in os.scandir(cache):
        if not version.is_dir(follow_symlinks=False) or (wanted is not None and version.name not in wanted):
            continue
        for module in os.scandir(version.path):
            if module.name.startswith("wp_") and not _BUILDING.search(module.name) \
                    and module.is_dir(follow_symlinks=False):
                yield version.name, module


def harvest(run_cache: Path, into: Path, max_bytes: int = MAX_BYTES, *, workspace: Path | None = None) -> list[str]:
    """Copy the modules a run forked from a worker compiled (in its own cache, `worker._own_kernel_cache`) into the
    cache of its code, `into`, which a fresh run of the same code writes directly; returns the folders copied.

    Without this, every forked run compiles again what no cache holds: Warp's own modules that the user never
    loads (`warp.autograd`, which the per-launch checks use) and the tracker's builds (their own module hash), a
    native compile of seconds in every `diagnose`. A folder is taken only when it is complete (not one of Warp's
    half-built `_p<pid>_t<thread>` folders) and made of regular files alone (a seeded folder holds links); one
    `into` already has is left as it is. It lands under a half-built name first and is renamed into place, so a
    concurrent run never seeds a partial copy. What lands here is what the same code's fresh run would have
    written itself (the cache's trust is per code, see the module doc)."""
    copied: list[str] = []
    if not run_cache.is_dir() or into.resolve() == run_cache.resolve():
        return copied
    for version, module in _module_folders(run_cache):
        dest = into / version / module.name
        if dest.exists():
            continue
        files = list(os.scandir(module.path))
        if not files or not all(f.is_file(follow_symlinks=False) for f in files) \
                or sum(f.stat(follow_symlinks=False).st_size for f in files) > max_bytes:
            continue
        part = dest.with_name(f"{module.name}_p{os.getpid()}_t{threading.get_ident()}")
        try:
            part.mkdir(parents=True)
            for f in files:
                shutil.copyfile(f.path, part / f.name, follow_symlinks=False)
            os.rename(part, dest)
            copied.append(module.name)
        except OSError:
            shutil.rmtree(part, ignore_errors=True)  # another run put it there first, or the disk is full
    _record_loaded(run_cache, into, workspace)  # the workspace's list too, when given (`seed_run` reads it)
    return copied


def run_cache(workspace: Path, starts: Iterable[tuple[str | None, list[str]]], user_cache: Path, run_tmp: Path,
              env: Mapping[str, str]) -> Path:
    """The kernel cache a run writes (its `WARP_CACHE_PATH`): the private one of its code, seeded from
    `user_cache`; a folder of `run_tmp` when the code is too large to key. Old caches are pruned when this one
    is new (only a new one adds to their number)."""
    key = code_key(Path(workspace), starts, user_cache)
    if key is None:
        cache = Path(run_tmp) / RUN_CACHE_DIR
    else:
        root = private_root(env)
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        cache = root / key
    try:
        cache.mkdir(mode=0o700)
        new = True
        loaded_path(cache).unlink(missing_ok=True)  # a list left by a removed cache of the same key
    except FileExistsError:
        new = False
        os.utime(cache)  # most recently used: kept by `prune`
    before = _listings(user_cache, user_cache, root_mtime=True)
    if new or _SEEDED.get((cache, user_cache)) != (before, _listings(cache, user_cache)):
        seed(cache, user_cache)
        # The user's side as it was before the seed (a module added meanwhile makes the next run seed again),
        # the cache's as the seed left it.
        _SEEDED[(cache, user_cache)] = (before, _listings(cache, user_cache))
    if key is not None and new:
        prune(cache.parent, keep=KEEP)
    return cache


# (cache, user cache) -> their listings when this process last seeded the one from the other (`run_cache`).
_SEEDED: dict[tuple[Path, Path], tuple[tuple, tuple]] = {}


def _listings(cache: Path, user_cache: Path, *, root_mtime: bool = False) -> tuple:
    """What a seed of a cache from `user_cache` depends on, read from `cache`'s side: the identity and
    modification time of each of `cache`'s folders named like a version folder of `user_cache`, and the identity
    of `cache` (its modification time too with `root_mtime`: a private cache's is touched by every run). A
    folder's modification time changes whenever an entry is added to it, removed or renamed (a module Warp
    built, one the user removed, a version folder added, a pruned and remade cache), so equal listings mean a
    seed would make nothing. Empty when `cache` is not a folder."""
    try:
        st = os.stat(cache)
        names = sorted(v.name for v in os.scandir(user_cache) if v.is_dir(follow_symlinks=False))
    except OSError:
        return ()
    out: list[tuple] = [("", st.st_dev, st.st_ino, st.st_mtime_ns if root_mtime else 0)]
    for name in names:
        try:
            v = os.stat(cache / name, follow_symlinks=False)
            out.append((name, v.st_dev, v.st_ino, v.st_mtime_ns))
        except OSError:
            out.append((name,))
    return tuple(out)


def prune(root: Path, keep: int, grace_s: float = GRACE_S) -> None:
    """Remove all but the `keep` most recently used caches under `root`, sparing any used in the last
    `grace_s` seconds: a run only touches its cache when it starts, and a long run must not lose the cache it
    is loading from. Runs prune concurrently (one per sandboxed run, two at once under `eval --jobs 2`), so a
    cache another run removed between the listing and its `lstat` is simply gone, not an error."""
    caches: list[tuple[float, Path]] = []
    now = time.time()
    for p in root.iterdir():
        try:
            st = p.lstat()
        except FileNotFoundError:
            continue  # removed by a concurrent prune
        if stat.S_ISDIR(st.st_mode):
            caches.append((st.st_mtime, p))
        elif p.name.startswith("ws-") and p.name.endswith(LOADED_SUFFIX) \
                and now - st.st_mtime >= WORKSPACE_LIST_MAX_AGE_S:
            p.unlink(missing_ok=True)  # a workspace not checked for a month: its list is only a guess by now
    caches.sort(key=lambda c: c[0], reverse=True)
    for mtime, old in caches[keep:]:
        if now - mtime >= grace_s:
            shutil.rmtree(old, ignore_errors=True)
            loaded_path(old).unlink(missing_ok=True)
