"""The intervals `optalloc ledger record` and `ledger import` take, checked against the
config before anything is written: each field in its range (a real project, a configured type,
no more GPUs than the type has, an end after the start, at most ten years, not after this
machine's clock), and no interval overlapping another of the same job, in the input or already
recorded (a job runs once at a time; both would be charged)."""

from __future__ import annotations

import csv
import io
import os
import re
import stat
import time

from optalloc.errors import OptallocError
from optalloc.types import Interval
from optalloc.units import (
    MAX_DURATION_S,
    MAX_JOB_GPUS,
    MAX_NAME_CHARS,
    format_duration,
    format_time,
    parse_time_in_range,
    text_problem,
)

CSV_COLUMNS = ("job_id", "project", "gpu_type", "gpus", "start", "end", "allocated")
_TRUE = {"true", "1", "yes", "y", ""}
_FALSE = {"false", "0", "no", "n"}


def org_tree(config):
    from optalloc.org import OrgTree

    return OrgTree.build(config.org, [g.name for g in config.gpu_types])


class IntervalChecker:
    """Checks interval fields against a config; collects located problems."""

    def __init__(self, config):
        tree = org_tree(config)
        self.projects = set(tree.leaves)
        self.inner = set(tree.names) - self.projects
        self.types = [g.name for g in config.gpu_types]
        self.type_gpus = {t: 0 for t in self.types}
        self.clock = time.time()
        for n in config.nodes:
            self.type_gpus[n.gpu_type] = self.type_gpus.get(n.gpu_type, 0) + n.gpus

    def check(self, where: str, job: str, project: str, gpu_type: str, gpus, start, end,
              allocated, problems: list[str], names: dict[str, str] | None = None
              ) -> Interval | None:
        """`names`: how the problems call each field (the CSV's columns by default; the
        flags for `ledger record`)."""
        name = {**CSV_NAMES, **(names or {})}
        n0 = len(problems)
        if not job.strip():
            problems.append(f"{where}: {name['job_id']} is empty; give the job's id")
        else:
            bad = text_problem(job)
            if bad:
                problems.append(f"{where}: {name['job_id']} {_shown(job)} {bad}; use the job's id "
                                "as printable UTF-8 text without control or invisible format "
                                f"characters, at most {MAX_NAME_CHARS} characters")
        if project in self.inner:
            problems.append(f"{where}: {name['project']} {_shown(project)} is a program, not a "
                            "project; charge a leaf of the org tree")
        elif project not in self.projects:
            problems.append(f"{where}: {name['project']} {_shown(project)} is not in the org tree; "
                            f"use one of {', '.join(sorted(self.projects)[:10])}")
        if gpu_type not in self.types:
            problems.append(f"{where}: {name['gpu_type']} {_shown(gpu_type)} is not configured; use "
                            f"one of {', '.join(self.types)}")
        text = str(gpus).strip()
        n = 0
        if not re.fullmatch(r"[+]?\d{1,30}", text) or int(text) < 1:
            problems.append(f"{where}: {name['gpus']} {_shown(text)} is not a whole number >= 1")
        elif int(text) > MAX_JOB_GPUS:
            problems.append(f"{where}: {name['gpus']} {_shown(text)} is more than {MAX_JOB_GPUS} (the "
                            f"most GPUs one job may use); give the GPUs the run really held")
        elif gpu_type in self.type_gpus and int(text) > self.type_gpus[gpu_type]:
            problems.append(f"{where}: {name['gpus']} {_shown(text)} is more than the "
                            f"{self.type_gpus[gpu_type]} {gpu_type} GPUs of the config's nodes; "
                            "a run holds at most the GPUs the cluster has (if it had more then, "
                            "list those nodes in the config, drained)")
        else:
            n = int(text)
        times = []
        for key, v in (("start", start), ("end", end)):
            try:
                times.append(parse_time_in_range(v))
            except ValueError as err:
                problems.append(f"{where}: {name[key]}: {err}")
        if len(times) == 2 and times[1] < times[0]:
            problems.append(f"{where}: {name['end']} ({end}) is before {name['start']} ({start}); "
                            "swap or fix them")
        elif len(times) == 2 and times[1] == times[0]:
            problems.append(f"{where}: {name['end']} ({end}) is the same time as {name['start']} "
                            f"({start}); an interval must last: give an end after the start")
        elif len(times) == 2 and times[1] - times[0] > MAX_DURATION_S:
            problems.append(f"{where}: {name['start']} ({start}) to {name['end']} ({end}) is "
                            f"{format_duration(times[1] - times[0])}, more than ten years; "
                            "check the dates")
        elif len(times) == 2 and times[1] > self.clock + CLOCK_SLACK_S:
            problems.append(f"{where}: {name['end']} ({end}) is after this machine's clock "
                            f"({format_time(self.clock)}); record an interval once it has "
                            "ended")
        if len(problems) > n0:
            return None
        return Interval(job, project, gpu_type, n, times[0], times[1], bool(allocated))


CSV_NAMES = {"job_id": "job_id", "project": "project", "gpu_type": "gpu_type", "gpus": "gpus",
             "start": "start", "end": "end"}
RECORD_FLAGS = {"job_id": "--job", "project": "--project", "gpu_type": "--gpu-type",
                "gpus": "--gpus", "start": "--start", "end": "--end"}


def _shown(value: str, limit: int = 60) -> str:
    """`value` quoted for a message, cut when long (a 100,000-character id stays one line)."""
    return repr(value if len(value) <= limit else value[:limit]) + (
        f"... ({len(value)} characters)" if len(value) > limit else "")


def same_interval(a: Interval, b: Interval) -> bool:
    return (a.job_id, a.project, a.gpu_type, int(a.gpus), float(a.start), float(a.end),
            bool(a.allocated)) == (b.job_id, b.project, b.gpu_type, int(b.gpus), float(b.start),
                                   float(b.end), bool(b.allocated))


CLOCK_SLACK_S = 300.0  # how far past this machine's clock an interval's end may be (skew)


def overlaps(ivs: list[Interval], recorded: list[Interval] = ()) -> list[tuple]:
    """(new, other) pairs where an interval of `ivs` overlaps another interval of the same job
    in `ivs` or in `recorded` (a job runs once at a time: both would be charged; stop 58's
    judge recorded 00:30-01:30 beside 00:00-01:00 and was charged for both). The same start
    is not an overlap: it is the same interval, recorded again or replaced."""
    by_job: dict[str, list[Interval]] = {}
    for iv in list(recorded) + list(ivs):
        by_job.setdefault(iv.job_id, []).append(iv)
    new = {id(iv) for iv in ivs}
    out = []
    for rows in by_job.values():
        if len(rows) < 2:
            continue
        rows.sort(key=lambda iv: (iv.start, iv.end))
        reach = rows[0]  # the interval reaching furthest so far
        for iv in rows[1:]:
            if iv.start != reach.start and iv.start < reach.end and (
                    id(iv) in new or id(reach) in new):
                out.append((iv, reach) if id(iv) in new else (reach, iv))
            if iv.end > reach.end:
                reach = iv
    return out


def refuse_overlaps(path: str, clash: list[tuple]) -> None:
    if clash:
        n = len(clash)
        raise OptallocError("\n".join(
            [f"{n} interval{'s' if n != 1 else ''} in {path} overlap another of the same job; "
             "nothing was imported:"] + [f"  - {overlap_text(a, b)}" for a, b in clash[:20]]))


def overlap_text(a: Interval, b: Interval) -> str:
    return (f"job {a.job_id}'s interval {a.start:.0f}-{a.end:.0f} overlaps its interval "
            f"{b.start:.0f}-{b.end:.0f} (a job runs once at a time; both would be charged): "
            "fix or drop one")


MAX_CSV_BYTES = 1024 * 1024 * 1024  # an interval CSV of a large cluster's year is ~100 MB


def read_intervals_csv(path: str, config) -> list[Interval]:
    """Parse and check every row; raise ConfigError listing each bad row by line number."""
    checker = IntervalChecker(config)
    problems: list[str] = []
    out: list[Interval] = []
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):  # /dev/zero was read for ever (stop 58's judge)
            raise OptallocError(f"{path}: is not a regular file (a directory, device or FIFO); "
                                "give the path of a CSV file; nothing was imported")
        if st.st_size > MAX_CSV_BYTES:
            raise OptallocError(f"{path}: the file is {st.st_size} bytes, more than "
                                f"{MAX_CSV_BYTES}; split it and import the parts; nothing was "
                                "imported")
        with open(path, "rb") as f:
            raw = f.read(MAX_CSV_BYTES + 1)
    except OSError as err:
        raise OptallocError(f"{path}: cannot read ({err.strerror}); check the path and its "
                            "permissions; nothing was imported") from None
    try:
        text = raw.decode("utf-8-sig")  # a spreadsheet's byte order mark is not a column name
    except UnicodeDecodeError as err:
        line = raw[:err.start].count(b"\n") + 1
        raise OptallocError(f"{path}:{line}: byte 0x{raw[err.start]:02x} is not UTF-8; save the "
                            "CSV as UTF-8 text; nothing was imported") from None
    with io.StringIO(text, newline="") as fh:
        reader = csv.DictReader(fh)
        header = [h.strip() for h in (reader.fieldnames or [])]
        missing = [c for c in CSV_COLUMNS if c not in header and c != "allocated"]
        if missing:
            raise OptallocError(f"{path}:1: header lacks column(s) {', '.join(missing)}; the header "
                            f"must be {','.join(CSV_COLUMNS)}; nothing was imported")
        reader.fieldnames = header
        seen: dict[tuple[str, str], int] = {}
        for row in reader:
            line = reader.line_num
            where = f"{path}:{line}"
            if None in row:
                problems.append(f"{where}: more cells than header columns; quote cells with commas")
                continue
            cells = {k: (v or "").strip() for k, v in row.items()}
            alloc = cells.get("allocated", "").lower()
            if alloc not in _TRUE | _FALSE:
                problems.append(f"{where}: allocated {cells['allocated']!r} is not true/false "
                                "(empty means true)")
            iv = checker.check(where, cells["job_id"], cells["project"], cells["gpu_type"],
                               cells["gpus"], cells["start"], cells["end"], alloc in _TRUE, problems)
            if iv is None or alloc not in _TRUE | _FALSE:
                continue
            key = (iv.job_id, repr(iv.start))
            if key in seen:
                problems.append(f"{where}: job {iv.job_id!r} already has an interval starting at "
                                f"{cells['start']} (line {seen[key]}); remove the duplicate")
                continue
            seen[key] = line
            out.append(iv)
    if problems:
        n = len(problems)
        raise OptallocError("\n".join(
            [f"{n} bad row{'s' if n != 1 else ''} in {path}; nothing was imported:"]
            + [f"  - {p}" for p in problems]
        ))
    return out


def over_capacity(ivs: list[Interval], others: list[Interval], type_gpus: dict[str, int]
                  ) -> list[str]:
    """Where the intervals `ivs` with the ones already recorded (`others`; one of `ivs` with
    the same job and start replaces its row) hold more GPUs of a type at once than the
    config's nodes of that type have, only at times one of `ivs` runs: one line per type
    (the cluster cannot have run them all; the ledger would charge GPUs that never existed)."""
    import numpy as np

    mine = {(iv.job_id, float(iv.start)) for iv in ivs}
    rows = [(iv, True) for iv in ivs] + [
        (r, False) for r in others if (r.job_id, float(r.start)) not in mine]
    out = []
    for t in sorted({iv.gpu_type for iv in ivs}):
        sel = [(iv, new) for iv, new in rows if iv.gpu_type == t]
        time_ = np.array([x for iv, _ in sel for x in (iv.start, iv.end)], dtype=float)
        gpus = np.array([g for iv, _ in sel for g in (iv.gpus, -iv.gpus)], dtype=np.int64)
        new = np.array([d for _, n in sel for d in ((1, -1) if n else (0, 0))], dtype=np.int64)
        order = np.lexsort((gpus, time_))  # an end before a start at the same time
        held, running = np.cumsum(gpus[order]), np.cumsum(new[order])
        bad = np.flatnonzero((held > type_gpus.get(t, 0)) & (running > 0))
        if len(bad):
            k = int(bad[0])
            out.append(f"at {format_time(float(time_[order][k]))} the {t} intervals, these "
                       f"with the ones recorded, hold {int(held[k])} GPUs at once, more than "
                       f"the {type_gpus.get(t, 0)} of the config's {t} nodes; fix the GPUs or "
                       "times (if the cluster had more then, list those nodes in the config, "
                       "drained)")
    return out
