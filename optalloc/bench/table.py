"""Benchmark rows as a Markdown table (shared by `optalloc bench` and each suite's __main__)."""

from __future__ import annotations


def markdown_table(rows: list[dict]) -> str:
    if not rows:
        return "(no rows)\n"
    cols: list[str] = []
    for r in rows:
        cols += [c for c in r if c not in cols]

    def cell(v) -> str:
        if isinstance(v, float):
            return f"{v:.4g}"
        return "" if v is None else str(v)

    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(cell(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(out) + "\n"
