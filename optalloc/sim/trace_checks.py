"""Checks of trace files before their rows become jobs (used by `optalloc.sim.traces`).

Every problem is a `ConfigError` line `FILE: column NAME: what is wrong (data rows ..., e.g.
...); what to do`. Data rows count from 1 after the header (ITP) or from the first line
(Philly, no header); blank lines are not counted (pandas skips them too).
"""

from __future__ import annotations

import csv
import os
import stat
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from optalloc.errors import ConfigError
from optalloc.units import MAX_DURATION_S, MAX_JOB_GPUS, MAX_TIME_S, text_problem

TRACES_ENV = "OPTALLOC_TRACES"
SHOWN_ROWS = 5  # rows named in a message


def rows_text(bad: Sequence[int] | np.ndarray) -> str:
    """'1, 2, 7' (1-based data rows) for the first SHOWN_ROWS of 0-based row indices."""
    return ", ".join(str(int(r) + 1) for r in list(bad)[:SHOWN_ROWS])


def shown(value: str, limit: int = 40) -> str:
    """A value as it appears in a message: quoted, escaped, at most `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


# --------------------------------------------------------------------------- reading


def check_regular(path: Path, fix: str) -> None:
    """Refuse a path that exists but is not a regular file: a FIFO would block the read
    forever and a device such as /dev/zero never ends (a missing file and a directory are
    left to the reader's own messages)."""
    try:
        st = os.stat(path)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        raise ConfigError([f"{path}: is not a regular file (a device or FIFO); {fix}"])


def read_table(path: Path, *, sep: str, header: int | None, expected: int | None = None,
               names: Sequence[str] = (), **kw) -> pd.DataFrame:
    """pd.read_csv with located errors. Every data row must have as many fields as the header
    (ITP) or `expected` (Philly); rows that do not are named."""
    parse_error = None
    check_regular(path, "point the workload's file at the trace's CSV file")
    try:
        df = pd.read_csv(path, sep=sep, header=header, **kw)
    except FileNotFoundError:
        raise ConfigError([f"{path}: file not found; check the workload's file/cluster/team and {TRACES_ENV}"]) from None
    except IsADirectoryError:
        raise ConfigError([f"{path}: is a directory, not a trace file; point the workload's "
                           "file at the trace's CSV file"]) from None
    except OSError as err:  # unreadable: permissions, I/O
        raise ConfigError([f"{path}: cannot read it ({err.strerror or err}); make it readable or "
                           "point the workload's file at another trace"]) from None
    except pd.errors.EmptyDataError as err:
        if header is None and expected:  # no header to miss (Philly): an empty file has no jobs
            return pd.DataFrame({c: pd.Series(dtype=object) for c in (names or range(expected))})
        df, parse_error = None, err
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        df, parse_error = None, err
    check_field_counts(path, sep, has_header=header is not None, expected=expected, names=names)
    if parse_error is not None:
        raise ConfigError([f"{path}: cannot be read as a trace ({parse_error}); restore the original file"])
    return df


def check_field_counts(path: Path, sep: str, *, has_header: bool, expected: int | None,
                       names: Sequence[str] = ()) -> None:
    """Refuse data rows with more or fewer fields than the header has (or `expected`)."""
    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as fh:
            rows = [len(r) for r in csv.reader(fh, delimiter=sep) if r]
    except (OSError, csv.Error):
        return  # pandas' own error (if any) is reported instead
    if has_header:
        if not rows:
            return
        header, rows = rows[0], rows[1:]
        expected = header if expected is None else expected
    if expected is None:
        return
    counts = np.asarray(rows, dtype=np.int64)
    bad = np.flatnonzero(counts != expected)
    if len(bad):
        what = f"the {expected} fields of the header" if has_header else f"{expected} fields"
        if names:
            what += f" ({', '.join(names)})"
        sep_name = "tab" if sep == "\t" else repr(sep)
        raise ConfigError(
            [f"{path}: {len(bad)} row(s) do not have {what} separated by {sep_name} "
             f"(data rows {rows_text(bad)}, e.g. {counts[bad[0]]} fields); fix or remove those rows"]
        )


# --------------------------------------------------------------------------- columns


def numeric(col: pd.Series, path: Path, name: str) -> np.ndarray:
    # a column of True/False only is read by pandas as booleans: words, not numbers (1.0/0.0)
    if pd.api.types.is_bool_dtype(col):
        col = pd.Series(np.nan, index=col.index)
    values = pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(values))
    if len(bad):
        raise ConfigError(
            [f"{path}: column {name}: {len(bad)} row(s) are not numbers (data rows {rows_text(bad)}); "
             "fix or remove those rows"]
        )
    return values


def check_rows(path: Path, submit: np.ndarray, work: np.ndarray, gpus: np.ndarray, names,
               *, work_is_duration: bool = True) -> None:
    """Submit times 0..2100, work > 0 (at most ten years when it is a duration), GPUs whole
    1..MAX_JOB_GPUS; every problem at once."""
    problems = []
    max_work = MAX_DURATION_S if work_is_duration else np.inf
    for values, name, ok, want in (
        (submit, names[0], submit >= 0, ">= 0"),
        (work, names[1], work > 0, "> 0"),
        (gpus, names[2], (gpus >= 1) & (gpus == np.round(gpus)), "a whole number >= 1"),
    ):
        bad = np.flatnonzero(~ok)
        if len(bad):
            problems.append(
                f"{path}: column {name}: {len(bad)} row(s) not {want} (data rows {rows_text(bad)}, "
                f"e.g. {values[bad[0]]:g}); fix or remove those rows"
            )
    for values, name, top, what in (
        (submit, names[0], MAX_TIME_S, f"{MAX_TIME_S:.0f} s (times end at 2100)"),
        (work, names[1], max_work, f"{MAX_DURATION_S:.0f} s (ten years)"),
        (gpus, names[2], MAX_JOB_GPUS, f"{MAX_JOB_GPUS} (the most GPUs a job may ask for)"),
    ):
        bad = np.flatnonzero(values > top)
        if len(bad):
            problems.append(
                f"{path}: column {name}: {len(bad)} row(s) more than {what} (data rows "
                f"{rows_text(bad)}, e.g. {values[bad[0]]:g}); fix or remove those rows"
            )
    if problems:
        raise ConfigError(problems)


def check_ids(path: Path, ids: np.ndarray, column: str = "job_id") -> None:
    """Job ids as the README's id rule has them (`units.text_problem`: printable UTF-8, no
    control or invisible format characters, at most 200 characters; no surrounding white
    space), none empty and none twice."""
    problems = []
    ids = [str(v) for v in ids]
    empty = [i for i, v in enumerate(ids) if not v.strip()]
    if empty:
        problems.append(f"{path}: column {column}: {len(empty)} row(s) have no id (data rows "
                        f"{rows_text(empty)}); give every job an id")
    invalid = []
    for i, v in enumerate(ids):
        if v.strip():
            why = text_problem(v) or ("starts or ends with white space" if v != v.strip() else None)
            if why:
                invalid.append((i, v, why))
    if invalid:
        i0, v0, why0 = invalid[0]
        problems.append(
            f"{path}: column {column}: {len(invalid)} row(s) have an id that is not valid (data rows "
            f"{rows_text([i for i, _, _ in invalid])}, e.g. {shown(v0)} {why0}); use printable UTF-8 "
            "text without control or invisible format characters or surrounding white space, at "
            "most 200 characters"
        )
    series = pd.Series(ids)
    dup = np.flatnonzero(series.duplicated(keep="first").to_numpy() & series.str.strip().ne("").to_numpy())
    if len(dup):
        v0 = ids[dup[0]]
        first = ids.index(v0)
        problems.append(
            f"{path}: column {column}: {len(dup)} row(s) repeat the id of an earlier row (data rows "
            f"{rows_text(dup)}, e.g. {shown(v0)} as on data row {first + 1}); give every job a "
            "unique id"
        )
    if problems:
        raise ConfigError(problems)
