"""The what-if notebook runs headless from top to bottom (so it never rots), and answers its
question: the variant gives B's project more entitlement, and the output says so."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "whatif.ipynb"


def test_whatif_notebook_runs_headless_and_answers_its_question(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [
        o.get("text", "")
        for cell in nb.cells
        if cell.cell_type == "code"
        for o in cell.get("outputs", [])
        if o.get("output_type") == "stream"
    ]
    errors = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == []
    text = "\n".join(outputs)
    assert "B: share 30 -> 33" in text
    assert "ilp (base)" in text and "ilp (variant)" in text
    assert "B1 gets" in text
