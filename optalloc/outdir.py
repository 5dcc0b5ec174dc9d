"""Output folders of the commands that write reports (simulate, whatif, bench, sweep, the
dashboard): checked before any work, created private (0700) whatever the umask, and written
under a umask that keeps files 0600."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path
from typing import Iterator

from optalloc.errors import OptallocError
from optalloc.statefile import DIR_MODE


def make_private_dirs(path: str | os.PathLike) -> Path:
    """Create `path` and any missing parents, each mode 0700 whatever the umask (directories
    that exist are left as they are). A directory that cannot be created (a name too long,
    a read-only or virtual file system) is an OptallocError naming it, never a traceback."""
    path = Path(path)
    try:
        _create_missing(path, [])
    except OSError as err:
        raise OptallocError(f"cannot create the directory {path} ({_why(err)}); choose another "
                            "directory") from None
    return path


def _create_missing(path: Path, made: list[Path]) -> None:
    """mkdir (0700) every missing directory down to `path`, appending each one it created to
    `made`, top first (so that a caller can remove them even when a later mkdir failed)."""
    missing = []
    p = path
    while not os.path.lexists(p) and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            continue
        made.append(d)
        os.chmod(d, DIR_MODE)


def _why(err: OSError) -> str:
    if err.errno == errno.ENAMETOOLONG:
        return "a name in the path is too long"
    return (err.strerror or str(err)).lower()


@contextlib.contextmanager
def private_umask() -> Iterator[None]:
    """While it lasts, files and folders are created without group or other permissions
    (umask 077 added to the current one): a CSV, PNG or HTML file written by pandas,
    matplotlib or plotly is 0600, a folder 0700."""
    old = os.umask(0o077)
    os.umask(old | 0o077)
    try:
        yield
    finally:
        os.umask(old)


def check_out_dir(path: str | os.PathLike, flag: str = "--out") -> None:
    """Before any work: `path` is an existing directory or can be created as one (it is not a
    file, and its nearest existing ancestor is a writable directory), and a file can be
    written in it. Tried for real: missing directories are created and a probe file written,
    then both removed again, so nothing is left behind."""
    text = os.fspath(path)
    if not text:
        raise OptallocError(f"{flag}: give a directory path")
    full = Path(os.path.abspath(text))
    if os.path.lexists(full) and not full.is_dir():
        kind = "a symbolic link to nothing" if full.is_symlink() else "a file, not a directory"
        raise OptallocError(f"{flag} {text} is {kind}; give a directory (created if missing), "
                            "or remove it first")
    p = full
    while not os.path.lexists(p):
        p = p.parent
    if not p.is_dir():
        raise OptallocError(f"{flag} {text}: {p} is a file, not a directory; give a directory "
                            "path under a directory")
    if not os.access(p, os.W_OK | os.X_OK):
        where = "is not writable" if p == full else f"cannot be created: {p} is not writable"
        raise OptallocError(f"{flag} {text} {where} by this user; choose a writable directory")
    _try_out_dir(full, text, flag)


def _try_out_dir(full: Path, text: str, flag: str) -> None:
    """Create the missing directories and a probe file in `full`, then remove what was made."""
    made: list[Path] = []
    step = "cannot be created"
    try:
        _create_missing(full, made)
        step = "cannot be written"
        fd, probe = tempfile.mkstemp(prefix=".optalloc-probe-", dir=full)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise OptallocError(f"{flag} {text} {step} ({_why(err)}); choose another directory") from None
    finally:
        for d in reversed(made):
            with contextlib.suppress(OSError):
                os.rmdir(d)
