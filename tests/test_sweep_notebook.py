"""The sweep notebook runs headless from top to bottom (so it never rots) and shows what it
says: every bad override reported at once, the plan's runs, a rerun that skips them all, and
the answer per cell."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "sweep.ipynb"


def test_sweep_notebook_runs_headless_and_answers_its_question(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    cells = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == []
    text = "\n".join(o.get("text", "") for c in cells for o in c.get("outputs", []) if o.get("output_type") == "stream")
    assert "4 problems found" in text
    assert "--grid: org.b.share=+25%: org node 'b' is not a child of the root; children of the root: A, B, C" in text
    assert "--grid policy.lookback=soon: policy.lookback: expected a duration" in text
    assert "--policies: greedy,gredy: unknown policy 'gredy'; did you mean greedy?" in text
    assert "6 cells x 1 policy x 2 seeds = 12 runs" in text
    assert "ran 12, skipped 0, failed 0" in text
    assert "ran 0, skipped 12" in text
    assert "B +50% with a 1-day window: B1 delivered" in text
