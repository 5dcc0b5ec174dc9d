"""models/*.mps: reference instances exported from the model builder, with their optimum pinned
and solved from the file by two independent backends (HiGHS and SCIP)."""

from __future__ import annotations

from pathlib import Path

import pytest

from optalloc.bench.instances import reference_instances
from optalloc.model.build import build_model
from optalloc.model.mps import to_mps
from optalloc.solve import BACKENDS, available_backends
from optalloc.types import SolverSettings

MODELS = Path(__file__).resolve().parents[1] / "models"

# optimum of c @ x (the MPS objective: the model's constant churn offset excluded)
# (stop 60: the floor weights' tie-break a factor of the tilt's, the same starts and keeps;
# before 25834.532066993466, 36581.671945318776, 66519.56721891549)
PINNED = {
    "toy": 25862.10559640523,
    "contract": 36660.76833086095,
    "mixed64": 66613.44982761114,
}


def _tokens(text: str) -> list:
    """MPS text as tokens, numbers parsed: two printings of the same float (numpy/HiGHS
    versions differ in the last digit they print) compare equal within 1e-12 relative."""
    out = []
    for tok in text.split():
        try:
            out.append(float(tok))
        except ValueError:
            out.append(tok)
    return out


@pytest.mark.parametrize("name", sorted(PINNED))
def test_the_reference_mps_file_is_what_the_builder_exports(name):
    snap = reference_instances()[name]
    want = _tokens((MODELS / f"{name}.mps").read_text())
    got = _tokens(to_mps(build_model(snap).lm, name))
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        if isinstance(w, float) and isinstance(g, float):
            assert g == pytest.approx(w, rel=1e-12, abs=1e-12), f"token {i}"
        else:
            assert g == w, f"token {i}"


@pytest.mark.parametrize("name", sorted(PINNED))
def test_highs_reads_the_reference_mps_and_finds_the_pinned_optimum(name):
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", 0.0)
    h.readModel(str(MODELS / f"{name}.mps"))
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    assert h.getInfo().objective_function_value == pytest.approx(PINNED[name], rel=1e-9)


@pytest.mark.parametrize("name", sorted(PINNED))
def test_scip_reads_the_reference_mps_and_finds_the_pinned_optimum(name):
    if "scip" not in available_backends():
        pytest.skip("SCIP not available")
    from ortools.linear_solver.python import model_builder_helper as mbh

    m = mbh.ModelBuilderHelper()
    assert m.import_from_mps_string((MODELS / f"{name}.mps").read_text())
    s = mbh.ModelSolverHelper("scip")
    s.set_solver_specific_parameters("limits/gap = 0")
    s.solve(m)
    assert s.status() == mbh.SolveStatus.OPTIMAL
    assert s.objective_value() == pytest.approx(PINNED[name], rel=1e-9)


@pytest.mark.parametrize("backend", ["highs", "scip", "cpsat", "cbc"])
@pytest.mark.parametrize("name", sorted(PINNED))
def test_every_backend_reaches_the_pinned_optimum_from_the_matrix(name, backend):
    if backend not in available_backends():
        pytest.skip(f"{backend} not available")
    lm = build_model(reference_instances()[name]).lm
    r = BACKENDS[backend].solve(lm, SolverSettings(mip_gap=0.0, time_limit_s=60))
    assert r.status == "optimal"
    assert r.objective - lm.obj_offset == pytest.approx(PINNED[name], rel=1e-7)
    assert r.bound >= r.objective - 1e-6


def test_the_lp_relaxation_bounds_every_reference_optimum():
    for name, snap in reference_instances().items():
        lm = build_model(snap).lm
        for lp in ("lp", "glop-lp"):
            r = BACKENDS[lp].solve(lm, SolverSettings())
            assert r.status == "optimal"
            assert r.bound - lm.obj_offset >= PINNED[name] - 1e-6
