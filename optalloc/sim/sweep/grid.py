"""A sweep's grid: axes (`--grid KEY=V1,V2,...`), their cells (every combination), the seeds
(`--seeds 0-4`) and the policies (`--policies greedy,ilp`), each parsed with every problem
reported, located, at once.

An axis value becomes the override `KEY=V` of `optalloc whatif --set`, and every override is
checked by the same parser (`optalloc.sim.whatif.apply_overrides`): first each fixed `--set`
and each axis value alone, then, when those are all fine, every cell as a whole (a combination
can be wrong where its parts are not, e.g. two axes that zero every sibling).
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from optalloc.config.problems import Loc, Problems, closest, show_list
from optalloc.errors import ConfigError
from optalloc.sim.whatif import apply_overrides
from optalloc.types import Config
from optalloc.units import MAX_SEED

_RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")
_INT = re.compile(r"^\s*(\d+)\s*$")

# A seed is a whole number from 0 to MAX_SEED (it is stored in 64-bit integer columns of the
# results table), for `simulate --seed`, `whatif --seed`, `bench --seed` and `sweep --seeds`;
# one sweep expands to at most MAX_SWEEP_SEEDS seeds (each is a scenario held in memory).
MAX_SWEEP_SEEDS = 1000
# and at most MAX_SWEEP_CELLS grid cells (each a configuration checked before any run; a
# 2,000 x 2,000 grid ran for minutes before it said anything)
MAX_SWEEP_CELLS = 10_000


def seed_problem(value: int) -> str | None:
    """Why `value` cannot be a seed (None if it can); the caller says what to give instead
    (SEED_FIX)."""
    if value < 0:
        return f"seed {value} is negative"
    if value > MAX_SEED:
        shown = str(value) if len(str(value)) <= 30 else f"{str(value)[:27]}..."
        return f"seed {shown} is more than {MAX_SEED} (2**63 - 1)"
    return None


SEED_FIX = f"give whole numbers from 0 to {MAX_SEED}"


@dataclass(frozen=True)
class Axis:
    """One `--grid` flag: an override key and the values it takes, in the order given."""

    key: str
    values: tuple[str, ...]

    def override(self, value: str) -> str:
        return f"{self.key}={value}"


@dataclass(frozen=True)
class Cell:
    """One combination of axis values (one per axis, in axis order)."""

    index: int
    values: tuple[str, ...]
    overrides: tuple[str, ...]  # the fixed --set overrides, then KEY=V per axis

    def label(self, axes: Sequence[Axis]) -> str:
        return ", ".join(a.override(v) for a, v in zip(axes, self.values)) or "(no grid)"


def parse_grid(texts: Sequence[str], problems: Problems, *, fixed: Sequence[str] = ()) -> tuple[Axis, ...]:
    """`KEY=V1,V2,...` per flag. Problems: no `=`, no key, an empty value, a value given
    twice, a key on two axes or also fixed by `--set`."""
    axes: list[Axis] = []
    fixed_keys = {t.split("=", 1)[0].strip() for t in fixed if "=" in t}
    seen: dict[str, str] = {}
    for text in texts:
        loc = Loc("--grid", text)
        if "=" not in text:
            problems.add(loc, "expected KEY=V1,V2,...", "write e.g. --grid org.B.share=+10%,+20% or --grid policy.lookback=3d,7d")
            continue
        key, rest = (s.strip() for s in text.split("=", 1))
        if not key:
            problems.add(loc, "no key before '='", "write e.g. org.B.share=+10%,+20%")
            continue
        values = [v.strip() for v in rest.split(",")]
        if not rest.strip():
            problems.add(loc, f"no values for {key}", "list the values after '=', separated by commas")
            continue
        if any(not v for v in values):
            problems.add(loc, "an empty value between commas", "remove the extra comma")
            continue
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            problems.add(loc, f"value(s) {show_list(twice)} given twice", "list each value once")
            continue
        if key in seen:
            problems.add(loc, f"{key} is already an axis ({seen[key]})", "give each key one --grid with all its values")
            continue
        if key in fixed_keys:
            problems.add(loc, f"{key} is also fixed by --set", "drop the --set or the --grid for it")
            continue
        seen[key] = f"--grid {text}"
        axes.append(Axis(key, tuple(values)))
    cells = math.prod(len(a.values) for a in axes)
    if cells > MAX_SWEEP_CELLS:  # each cell is a configuration checked and held in memory
        sizes = " x ".join(str(len(a.values)) for a in axes)
        problems.add(Loc("--grid", ", ".join(a.key for a in axes)),
                     f"{cells:,} cells ({sizes}), more than {MAX_SWEEP_CELLS:,}",
                     "give fewer values per --grid, or split the grid into several sweeps")
    return tuple(axes)


def parse_seeds(text: str | None, problems: Problems, default: int) -> tuple[int, ...]:
    """`0-4`, `0,3,7` or `1-3,9` (ascending, each once); None: the scenario's own seed. Each
    seed is 0 .. MAX_SEED, and at most MAX_SWEEP_SEEDS of them (counted before a range is
    expanded, so `0-100000000` costs nothing)."""
    if text is None:
        bad = seed_problem(int(default))
        if bad:
            problems.add(Loc("--seeds", "(not given)"), f"the scenario's simulation.seed: {bad}",
                         f"pass --seeds, or fix simulation.seed ({SEED_FIX})")
            return ()
        return (int(default),)
    loc = Loc("--seeds", text if len(text) <= 80 else f"{text[:77]}...")
    parts: list[tuple[int, int]] = []
    count = 0
    for part in text.split(","):
        m_range, m_int = _RANGE.match(part), _INT.match(part)
        if len(part.strip()) > 40:
            problems.add(loc, f"{part.strip()[:40]}... is too long for a seed",
                         SEED_FIX)
            return ()
        if m_range:
            lo, hi = int(m_range.group(1)), int(m_range.group(2))
            if lo > hi:
                problems.add(loc, f"range {part.strip()} runs backwards", f"write {hi}-{lo}")
                return ()
        elif m_int:
            lo = hi = int(m_int.group(1))
        else:
            problems.add(loc, f"{part.strip()!r} is not a seed or a range", "write whole numbers >= 0: 0-4, 0,3,7 or 1-3,9")
            return ()
        bad = seed_problem(hi)
        if bad:
            problems.add(loc, bad, SEED_FIX)
            return ()
        parts.append((lo, hi))
        count += hi - lo + 1
        if count > MAX_SWEEP_SEEDS:
            problems.add(loc, f"more than {MAX_SWEEP_SEEDS} seeds", f"one sweep takes at most "
                         f"{MAX_SWEEP_SEEDS} seeds; split it into several sweeps (e.g. --seeds "
                         f"0-{MAX_SWEEP_SEEDS - 1}, then --seeds {MAX_SWEEP_SEEDS}-...)")
            return ()
    out = [s for lo, hi in parts for s in range(lo, hi + 1)]
    twice = sorted({s for s, n in Counter(out).items() if n > 1})
    if twice:
        problems.add(loc, f"seed(s) {show_list(map(str, twice))} given twice", "list each seed once")
        return ()
    return tuple(sorted(out))


def format_seeds(seeds: Sequence[int]) -> str:
    """The shortest `--seeds` text for these seeds (ranges for runs of 3 or more)."""
    s = sorted(set(seeds))
    parts, i = [], 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        parts.append(f"{s[i]}-{s[j]}" if j - i >= 2 else ",".join(map(str, s[i : j + 1])))
        i = j + 1
    return ",".join(parts)


def parse_policies(text: str, problems: Problems) -> tuple[str, ...]:
    from optalloc.sim.policies import POLICIES

    names = [p.strip().lower() for p in text.split(",") if p.strip()]
    if not names:
        problems.add(Loc("--policies", text), "no policy named", f"choose from {', '.join(POLICIES)}")
    for name in names:
        if name not in POLICIES:
            hint = closest(name, POLICIES)
            problems.add(Loc("--policies", text), f"unknown policy {name!r}",
                         f"did you mean {hint}?" if hint else f"choose from {', '.join(POLICIES)}")
    return tuple(dict.fromkeys(n for n in names if n in POLICIES))


def make_cells(axes: Sequence[Axis], fixed: Sequence[str] = ()) -> tuple[Cell, ...]:
    """Every combination of axis values, the last axis varying fastest."""
    combos = itertools.product(*(a.values for a in axes))
    return tuple(
        Cell(i, tuple(vals), tuple(fixed) + tuple(a.override(v) for a, v in zip(axes, vals)))
        for i, vals in enumerate(combos)
    )


def check_overrides(config: Config, axes: Sequence[Axis], cells: Sequence[Cell], fixed: Sequence[str],
                    problems: Problems, jobs: Sequence = ()) -> None:
    """Record every problem the what-if parser finds: in `--set`, in each axis value, and (only
    when those are all fine) in each cell's combination (`jobs`: the scenario's workload, which
    each cell's policy must fit)."""
    base = _checked(config, fixed, "--set", problems, jobs)
    bad = base is None
    for axis in axes:
        for v in axis.values:
            bad |= _checked(base if base is not None else config, [axis.override(v)], "--grid",
                            problems, jobs) is None
    if bad:
        return
    for cell in cells:
        _checked(config, cell.overrides, f"--grid cell [{cell.label(axes)}]", problems, jobs)


def _checked(config: Config, overrides: Sequence[str], source: str, problems: Problems,
             jobs: Sequence = ()) -> Config | None:
    try:
        return apply_overrides(config, list(overrides), source=source, jobs=jobs)
    except ConfigError as err:
        for p in err.problems:
            if p not in problems.items:
                problems.items.append(p)
        return None
