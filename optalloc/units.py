"""Parsing of human durations and times ("8h", "15m", "7d", 3600, ISO timestamps)."""

from __future__ import annotations

import datetime as _dt
import math
import re

_UNITS = {"s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
_DUR_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|min|m|h|d|w)?\s*$")


def parse_duration(value: object) -> float:
    """Seconds from a number (seconds) or a string like '90s', '15m', '8h', '7d', '1h30m'.

    Raises ValueError with a message saying the accepted forms.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a duration, got {value!r}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError(f"expected a finite duration, got {value!r}")
        if value < 0:
            raise ValueError(f"duration must be >= 0, got {value}")
        return float(value)
    if isinstance(value, str):
        s = value.strip()
        total, pos = 0.0, 0
        parts = re.findall(r"(\d+(?:\.\d+)?)\s*(min|s|m|h|d|w)", s)
        if parts and re.fullmatch(r"(\s*\d+(?:\.\d+)?\s*(min|s|m|h|d|w))+\s*", s):
            for num, unit in parts:
                total += float(num) * _UNITS[unit]
            return total
        m = _DUR_RE.match(s)
        if m:
            return float(m.group(1)) * _UNITS[m.group(2) or "s"]
    raise ValueError(
        f"expected a duration like 3600, '90s', '15m', '8h', '7d' or '1h30m', got {value!r}"
    )


def parse_time(value: object) -> float:
    """Seconds from a number (seconds since the epoch / scenario start) or an ISO-8601 string
    (naive strings are UTC)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a time, got {value!r}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError(f"expected a finite time, got {value!r}")
        return float(value)
    if isinstance(value, _dt.datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc)
        return dt.timestamp()
    if isinstance(value, _dt.date):  # YAML reads an unquoted 2026-11-29 as a date: midnight UTC
        return _dt.datetime(value.year, value.month, value.day, tzinfo=_dt.timezone.utc).timestamp()
    if isinstance(value, str):
        try:
            dt = _dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            try:
                seconds = float(value)
            except ValueError:
                pass
            else:
                if math.isfinite(seconds):
                    return seconds
        else:
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=_dt.timezone.utc)
            return dt.timestamp()
    raise ValueError(f"expected a time (seconds or ISO-8601 like 2026-11-29T12:00:00Z), got {value!r}")


def _num(x: float, digits: str = ".3g") -> str:
    """x rounded to `digits` significant digits, never in exponent form ('1e+03' would not
    parse back as a duration)."""
    return f"{float(format(x, digits)):.15g}"


def format_duration(seconds: float) -> str:
    s = float(seconds)
    if s >= 86400 and s % 3600 == 0:
        return f"{_num(s / 86400, 'g')}d" if s % 86400 == 0 else f"{_num(s / 3600, 'g')}h"
    if s >= 3600:
        return f"{_num(s / 3600)}h"
    if s >= 60:
        return f"{_num(s / 60)}m"
    return f"{_num(round(s, 3))}s"  # sub-millisecond values print as 0s
