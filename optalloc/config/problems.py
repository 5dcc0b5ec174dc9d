"""Collecting located problems, and typed field readers that report instead of raising.

Every problem reads ``FILE: key.path[3].sub: what is wrong; how to fix``. Parsers never stop at
the first problem: a reader that finds a bad value records it and returns ``MISSING`` so the
caller can skip the checks that depend on it, and validation goes on with the next field.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from optalloc.errors import ConfigError
from optalloc.units import (
    MAX_DURATION_S,
    MAX_TIME_S,
    check_duration,
    check_time,
    parse_duration,
    parse_time,
    text_problem,
)


class _Missing:
    """Sentinel: the value is absent or invalid (its problem is already recorded)."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


def show_list(names: Iterable[str], first: int = 6) -> str:
    """'a, b, c' or, for long lists, 'a, b, c, ... (40 in all)'."""
    names = [str(n) for n in names]
    if not names:
        return "(none)"
    if len(names) <= first:
        return ", ".join(names)
    return ", ".join(names[:first]) + f", ... ({len(names)} in all)"


def closest(word: str, choices: Sequence[str]) -> str | None:
    found = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return found[0] if found else None


def type_name(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value:g})"
    if isinstance(value, str):
        return f"a string ({value!r})" if len(value) <= 40 else "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return type(value).__name__


@dataclass(frozen=True)
class Piece:
    """One file's part of a section (list sections may come in several pieces)."""

    source: str
    value: Any


@dataclass(frozen=True)
class Loc:
    """Where a value lives: the file and the key path inside it."""

    source: str
    path: str = ""

    def key(self, name: str) -> "Loc":
        return Loc(self.source, f"{self.path}.{name}" if self.path else str(name))

    def idx(self, i: int) -> "Loc":
        return Loc(self.source, f"{self.path}[{i}]")

    def __str__(self) -> str:
        return f"{self.source}: {self.path}" if self.path else self.source


def _beside(v: float, limit: float) -> str:
    """`v` as %g, or with every digit where %g would print it as the limit it broke
    (1000000001 against 1e9: "got 1000000001", not "got 1e+09")."""
    short = f"{v:g}"
    return f"{v:.17g}" if short == f"{limit:g}" else short


@dataclass
class Problems:
    """An ordered list of located problem messages."""

    items: list[str] = field(default_factory=list)

    def add(self, loc: Loc, what: str, fix: str | None = None) -> None:
        msg = f"{loc}: {what}"
        if fix:
            msg += f"; {fix}"
        if msg not in self.items:
            self.items.append(msg)

    def __len__(self) -> int:
        return len(self.items)

    def raise_if_any(self) -> None:
        if self.items:
            raise ConfigError(self.items)

    # ------------------------------------------------------------------ structure

    def mapping(self, value: Any, loc: Loc, what: str = "a mapping") -> Mapping | Any:
        if isinstance(value, Mapping):
            return value
        self.add(loc, f"expected {what}, got {type_name(value)}", "write it as `key: value` lines")
        return MISSING

    def sequence(self, value: Any, loc: Loc, what: str = "a list") -> list | Any:
        if isinstance(value, list):
            return value
        self.add(loc, f"expected {what}, got {type_name(value)}", "write it as a `- item` list")
        return MISSING

    def known_keys(
        self, data: Mapping, loc: Loc, allowed: Sequence[str], required: Sequence[str] = ()
    ) -> None:
        """Report unknown keys (with the closest valid key) and missing required keys."""
        for k in data:
            if k in allowed:
                continue
            kl = loc.key(str(k))
            near = closest(str(k), allowed)
            if near:
                self.add(kl, f"unknown key {k!r}", f"did you mean {near!r}?")
            else:
                self.add(kl, f"unknown key {k!r}", f"valid keys here: {', '.join(allowed)}")
        for k in required:
            if k not in data:
                self.add(loc.key(k), "missing required key", f"add `{k}:`")

    # ------------------------------------------------------------------ scalars

    def string(self, value: Any, loc: Loc, *, allow_int: bool = False) -> str | Any:
        if isinstance(value, str) and value.strip():
            bad = text_problem(value)
            if bad:
                self.add(loc, f"the value {bad}", "use printable UTF-8 text without control "
                         "or invisible format characters, at most 200 characters")
                return MISSING
            if value != value.strip():  # 'a' and 'a ' would be two names that print alike
                self.add(loc, f"{value!r} starts or ends with white space",
                         f"names are compared exactly: write {value.strip()!r}")
                return MISSING
            return value
        if allow_int and isinstance(value, int) and not isinstance(value, bool):
            if abs(value) >= 10**18:
                self.add(loc, f"the number {value} is too long for a name", "use a shorter id")
                return MISSING
            return str(value)
        if isinstance(value, str):
            self.add(loc, "must not be empty", "give a name")
        else:
            self.add(loc, f"expected a string, got {type_name(value)}", "quote it, e.g. \"name\"")
        return MISSING

    def integer(
        self, value: Any, loc: Loc, *, minimum: int | None = None, maximum: int | None = None
    ) -> int | Any:
        if isinstance(value, bool) or not isinstance(value, int):
            fix = "write a whole number like 8"
            if isinstance(value, float) and value.is_integer():
                fix = f"write {int(value)} without a decimal point"
            self.add(loc, f"expected an integer, got {type_name(value)}", fix)
            return MISSING
        if minimum is not None and value < minimum:
            self.add(loc, f"must be >= {minimum}, got {value}", f"use a value of at least {minimum}")
            return MISSING
        if maximum is not None and value > maximum:
            self.add(loc, f"must be <= {maximum}, got {_short(value)}", f"use a value of at most {maximum}")
            return MISSING
        return value

    def number(
        self,
        value: Any,
        loc: Loc,
        *,
        minimum: float | None = None,
        positive: bool = False,
        maximum: float | None = None,
    ) -> float | Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            if isinstance(value, str) and _yaml11_exponent(value):
                # YAML 1.1 (PyYAML) reads 1e10 as text: only 1.0e10 or 1.0e+10 is a float
                as_float = _as_yaml_float(value)
                if not math.isfinite(float(as_float)):  # 1e400: a float, but not a finite one
                    self.add(loc, f"{value!r} is beyond the largest number (about 1.8e+308)",
                             f"write a finite number{_range_hint(minimum, maximum)}")
                    return MISSING
                self.add(loc, f"{value!r} is text to YAML 1.1 (an exponent needs a decimal "
                              "point and a sign)", f"write it as {as_float}")
                return MISSING
            self.add(loc, f"expected a number, got {type_name(value)}", "write a number like 1.5")
            return MISSING
        v = float(value)
        if not math.isfinite(v):
            self.add(loc, f"must be a finite number, got {value}", "write a finite number")
            return MISSING
        if positive and v <= 0:
            self.add(loc, f"must be > 0, got {value:g}", "use a positive number")
            return MISSING
        if minimum is not None and v < minimum:
            self.add(loc, f"must be >= {minimum:g}, got {_beside(v, minimum)}",
                     f"use a value of at least {minimum:g}")
            return MISSING
        if maximum is not None and v > maximum:
            self.add(loc, f"must be <= {maximum:g}, got {_beside(v, maximum)}",
                     f"use a value of at most {maximum:g}")
            return MISSING
        return v

    def boolean(self, value: Any, loc: Loc) -> bool | Any:
        if isinstance(value, bool):
            return value
        self.add(loc, f"expected true or false, got {type_name(value)}", "write true or false")
        return MISSING

    def duration(self, value: Any, loc: Loc, *, positive: bool = False) -> float | Any:
        return self._parsed(value, loc, parse_duration, positive)

    def time(self, value: Any, loc: Loc) -> float | Any:
        return self._parsed(value, loc, parse_time, False)

    def _parsed(self, value: Any, loc: Loc, fn: Callable[[Any], float], positive: bool):
        kind = "duration" if fn is parse_duration else "time"
        try:
            v = fn(value)
        except (ValueError, TypeError, OverflowError) as err:
            if ">= 0" in str(err):
                self.add(loc, f"a {kind} must be >= 0, got {value!r}", "use 0 or a positive duration")
            else:
                self.add(loc, f"expected a {kind}, got {type_name(value)}", _fix_for(fn))
            return MISSING
        try:
            (check_duration if fn is parse_duration else check_time)(v)
        except ValueError:
            if fn is parse_duration:
                self.add(loc, f"duration {_short(value)} is out of range",
                         f"use at most {MAX_DURATION_S:.0f} seconds (ten years)")
            else:
                self.add(loc, f"time {_short(value)} is out of range",
                         f"use seconds from 0 to {MAX_TIME_S:.0f} or an ISO-8601 time "
                         "from 1970 to 2100")
            return MISSING
        if positive and v <= 0:
            self.add(loc, f"must be > 0, got {value!r}", "give a positive duration like '5m'")
            return MISSING
        return v

    def choice(self, value: Any, loc: Loc, choices: Sequence[str], what: str) -> str | Any:
        if isinstance(value, str) and value in choices:
            return value
        near = closest(str(value), choices) if isinstance(value, str) else None
        fix = f"did you mean {near!r}?" if near else f"use one of: {', '.join(choices)}"
        if near:
            fix = f"did you mean {near!r}? (one of: {', '.join(choices)})"
        self.add(loc, f"unknown {what} {value!r}", fix)
        return MISSING


def _short(value: Any) -> str:
    """A value for a message, never a 10 MB one."""
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def _fix_for(fn: Callable) -> str:
    if fn is parse_duration:
        return "write seconds (3600) or a duration like '90s', '15m', '8h', '7d', '1h30m'"
    return "write seconds or an ISO-8601 time like 2026-11-29T12:00:00Z"


def _yaml11_exponent(text: str) -> bool:
    """A number in exponent form that YAML 1.1 does not read as one (1e10, 2E-3, 5e+4)."""
    import re

    return bool(re.fullmatch(r"\s*[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+\s*", text))


def _range_hint(minimum: float | None, maximum: float | None) -> str:
    """' (at most 1e+09)' and the like, where a range is given."""
    if maximum is not None and minimum is not None:
        return f" from {minimum:g} to {maximum:g}"
    if maximum is not None:
        return f" of at most {maximum:g}"
    return f" of at least {minimum:g}" if minimum is not None else ""


def _as_yaml_float(text: str) -> str:
    """`text` (an exponent number) in the form YAML 1.1 reads as a float: 1.0e+10."""
    mant, exp = text.strip().lower().split("e")
    mant = mant if "." in mant else mant + ".0"
    exp = exp if exp[:1] in "+-" else "+" + exp
    return f"{mant}e{exp}"
