"""Opening warpgrad's own state files (`.warpgrad/...`) without following anything a script planted there.

The workspace, `.warpgrad/` included, may have been written by the user's script (or come from a cloned
repository), while warpgrad's parent process runs unsandboxed. So a state file is never opened by name:
every folder on the way is opened with `O_NOFOLLOW | O_DIRECTORY` relative to the folder above it (a
`dir_fd`), every file with `O_NOFOLLOW` relative to its checked folder, files that are appended to or
truncated must be regular files with one link (a hard link to `~/.bashrc` would otherwise be appended
to), and temp files get `O_EXCL` and an unpredictable name. A planted link is refused with the path and
what to do, and nothing is written through it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from .registry import ToolError

STATE_DIR = ".warpgrad"
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafeStateFile(ToolError):
    """A state file or folder is a link, not a regular file, or shared by a hard link: it is not used."""


def _refuse(where: Path, what: str) -> UnsafeStateFile:
    return UnsafeStateFile(
        f"{where} is {what}; warpgrad does not follow links or write shared files in its own state (a script "
        "may have planted it to make warpgrad write outside the workspace). Nothing was written through it. "
        "Remove it (or move .warpgrad/ aside) and try again")


def _check_name(name: str) -> None:
    if not name or "/" in name or name in (".", ".."):
        raise UnsafeStateFile(f"{name!r} is not a plain file name inside warpgrad's state")


class StateDir:
    """An open folder of warpgrad's state, checked not to be a link; files inside are opened relative to it.

    Args:
        fd: The folder's file descriptor (owned: closed by `close`).
        where: Its path, for messages only (never used to open anything).
    """

    def __init__(self, fd: int, where: Path) -> None:
        self.fd = fd
        self.where = where

    @classmethod
    def of_workspace(cls, workspace: Path, *, create: bool = True) -> StateDir:
        """`<workspace>/.warpgrad/`, refusing one that is a link (the workspace root itself is the user's choice).

        Raises:
            UnsafeStateFile: `.warpgrad` is a link or not a folder.
            FileNotFoundError: It does not exist and `create` is false.
        """
        root = os.open(Path(workspace), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            return cls(_open_dir(root, STATE_DIR, Path(workspace) / STATE_DIR, create), Path(workspace) / STATE_DIR)
        finally:
            os.close(root)

    def sub(self, rel: str, *, create: bool = True) -> StateDir:
        """A folder below this one (`a` or `a/b/c`), each step opened without following links."""
        fd, where = self.fd, self.where
        parts = rel.split("/")
        for part in parts:
            _check_name(part)
        opened: list[int] = []
        try:
            for part in parts:
                where = where / part
                fd = _open_dir(fd, part, where, create)
                opened.append(fd)
        except BaseException:
            for f in opened:
                os.close(f)
            raise
        for f in opened[:-1]:
            os.close(f)
        return StateDir(opened[-1], where)

    def open(self, name: str, flags: int, mode: int = 0o644, *, single_link: bool = False) -> int:
        """An fd of file `name` here, opened with `O_NOFOLLOW`; it must be a regular file (one link when
        `single_link`, for files warpgrad appends to or truncates)."""
        _check_name(name)
        try:
            fd = os.open(name, flags | _NOFOLLOW | os.O_NONBLOCK, mode, dir_fd=self.fd)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.EMLINK):
                raise _refuse(self.where / name, "a symbolic link") from None
            raise
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (single_link and st.st_nlink > 1):
            os.close(fd)
            raise _refuse(self.where / name, "not a regular file" if not stat.S_ISREG(st.st_mode)
                          else f"a file with {st.st_nlink} hard links (shared with a file elsewhere)")
        os.set_blocking(fd, True)
        return fd

    def read_bytes(self, name: str) -> bytes | None:
        """The file's bytes, or None when it does not exist."""
        try:
            fd = self.open(name, os.O_RDONLY)
        except FileNotFoundError:
            return None
        with os.fdopen(fd, "rb") as f:
            return f.read()

    def exists(self, name: str) -> bool:
        """Whether anything (a link included) has this name here."""
        try:
            os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def append(self, name: str, data: bytes) -> int:
        """Append `data` with one write (created when absent) and fsync; returns the bytes written."""
        fd = self.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, single_link=True)
        try:
            n = os.write(fd, data)
            os.fsync(fd)
            return n
        finally:
            os.close(fd)

    def truncate(self, name: str, size: int) -> None:
        fd = self.open(name, os.O_WRONLY, single_link=True)
        try:
            os.ftruncate(fd, size)
        finally:
            os.close(fd)

    def new_temp(self, stem: str, mode: int = 0o600) -> tuple[str, int]:
        """A new file with an unpredictable name (`O_EXCL`): its name and an fd open for writing."""
        name = f"{os.getpid()}-{secrets.token_hex(8)}-{stem}"[:240]
        return name, self.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)

    def write_atomic(self, name: str, data: bytes, mode: int = 0o644) -> None:
        """Replace `name` here by `data` through an exclusive temp file and a rename (a planted link at
        `name` is replaced, never followed)."""
        _check_name(name)
        tmp, fd = self.new_temp(name + ".tmp", mode)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=self.fd)
            raise

    def unlink(self, name: str) -> None:
        _check_name(name)
        os.unlink(name, dir_fd=self.fd)

    def names(self) -> list[str]:
        return sorted(os.listdir(self.fd))

    @contextlib.contextmanager
    def lock(self, name: str) -> Iterator[None]:
        """An exclusive `flock` on `name` here (created when absent) held for the block."""
        fd = self.open(name, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> StateDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(OSError, AttributeError):
            self.close()


def _open_dir(parent: int, name: str, where: Path, create: bool) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW
    try:
        return os.open(name, flags, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            raise
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refuse(where, "a symbolic link or not a folder") from None
        raise
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o755, dir_fd=parent)
    try:
        return os.open(name, flags, dir_fd=parent)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refuse(where, "a symbolic link or not a folder") from None
        raise
