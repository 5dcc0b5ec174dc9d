"""State-file helpers for cron safety: an exclusive lock beside the state DB and atomic file
writes (readers see the old or the new file, never a torn one)."""

from __future__ import annotations

import errno
import fcntl
import os
import time

from optalloc.errors import LockBusy


class StateLock:
    """An exclusive advisory lock beside the state DB (`<db>.lock`), so two cron runs of
    `optalloc epoch` never interleave. The second waits up to `wait_s`, then raises LockBusy
    naming the holder. The kernel drops the lock if the holder dies: no stale locks."""

    def __init__(self, state_path: str, wait_s: float = 0.0):
        self.path = f"{state_path}.lock"
        self.wait_s = wait_s
        self._fd: int | None = None

    def __enter__(self) -> "StateLock":
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
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


def write_atomic(path: str, text: str) -> None:
    """Write a file so readers see the old or the new content, never a torn one."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


