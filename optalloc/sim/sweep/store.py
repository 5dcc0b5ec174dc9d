"""A sweep's output folder, written so that a sweep killed at any point can be run again:

    OUT/sweep.json             the plan (scenario, axes, policies, seeds, every run and its key)
    OUT/runs/<key>.json        one finished run: its record (status, error, metrics, ...)
    OUT/results.parquet, .csv  the tidy table, one row per cell x policy x seed
    OUT/summary.parquet, .csv  mean and spread over seeds, one row per cell x policy x metric
    OUT/summary.md             the headline metrics, mean +- sd over seeds
    OUT/plots/<axis>.html      every metric against each grid axis (plotly)

Every file is written to a temporary name in the same folder and renamed over the target
(`os.replace`, atomic on POSIX), after an fsync: a run file is either whole or absent. The
folders (OUT, runs/, plots/) are created 0700 whatever the umask; a file is 0644 inside them.

Folders come from optalloc.outdir (private whatever the umask), as for `simulate`, `whatif`,
`bench` and the dashboard.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

from optalloc.errors import OptallocError
from optalloc.sim.sweep.cell import OK
from optalloc.outdir import make_private_dirs

RUNS = "runs"


def atomic_write(path: Path, write: Callable[[Path], None]) -> Path:
    """Call `write(tmp)` for a temporary file next to `path`, then rename it over `path`."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json(path: Path, doc: Any) -> Path:
    text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    return atomic_write(path, lambda p: p.write_text(text))


class RunStore:
    """The finished runs under OUT/runs, by key."""

    def __init__(self, out: Path):
        self.out = Path(out)
        self.dir = self.out / RUNS

    def prepare(self) -> None:
        if self.out.exists() and not self.out.is_dir():
            raise OptallocError(f"--out {self.out} is a file; give a directory")
        make_private_dirs(self.dir)

    def path(self, key: str) -> Path:
        return self.dir / f"{key}.json"

    def load(self, key: str) -> dict | None:
        """The stored record, or None when absent or unreadable (then the run is redone)."""
        try:
            doc = json.loads(self.path(key).read_text())
        except (OSError, ValueError):
            return None
        return doc if isinstance(doc, dict) and doc.get("key") == key else None

    def finished(self, key: str) -> dict | None:
        """The stored record if the run succeeded; a failed run is tried again."""
        doc = self.load(key)
        return doc if doc is not None and doc.get("status") == OK else None

    def save(self, doc: dict) -> Path:
        return write_json(self.path(doc["key"]), doc)
