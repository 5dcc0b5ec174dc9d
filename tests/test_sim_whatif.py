"""What-if: overrides change exactly the named values (or report every problem, located), and
a budget change moves GPU time towards the project that got it."""

from __future__ import annotations

import pytest

from optalloc.errors import ConfigError
from optalloc.sim.engine import simulate
from optalloc.sim.scenario import Scenario
from optalloc.sim.policies import make_policy
from optalloc.sim.whatif import apply_overrides, run_whatif, with_config
from optalloc.types import Config, GpuType, Job, Node, OrgNode, Policy, UsageMode

H = 3600.0


def cfg() -> Config:
    org = OrgNode(
        "ai2",
        children=(
            OrgNode("A", share=50, children=(OrgNode("A1", share=35), OrgNode("A2", share=65))),
            OrgNode("B", share=50, children=(OrgNode("B1"),)),
        ),
    )
    return Config(
        gpu_types=(GpuType("h100"), GpuType("b200", 1.6)),
        nodes=(Node("n1", "h100", 8), Node("n2", "b200", 8)),
        org=org,
        policy=Policy(epoch_s=300.0, grace_s=0.0, lookback_s=86400.0),
    )


def shares(c: Config) -> dict:
    out = {}

    def rec(n):
        out[n.name] = (n.share, dict(n.share_by_type))
        for k in n.children:
            rec(k)

    rec(c.org)
    return out


BASE = {"ai2": (1.0, {}), "A": (50, {}), "A1": (35, {}), "A2": (65, {}), "B": (50, {}), "B1": (1.0, {})}


@pytest.mark.parametrize(
    "overrides, changed",
    [
        (["org.A.A1.share=40"], {"A1": (40.0, {})}),
        (["org.ai2.A.A1.share=40"], {"A1": (40.0, {})}),  # the root's name may be given
        (["org.A1.share=40"], {"A1": (40.0, {})}),  # a unique name alone
        (["org.B.share=+10%"], {"B": (55.0, {})}),
        (["org.B.share=-10%"], {"B": (45.0, {})}),
        (["org.B.share=*2"], {"B": (100.0, {})}),
        (["org.B.share=+5"], {"B": (55.0, {})}),
        (["org.A.share_by_type.b200=0"], {"A": (50, {"b200": 0.0})}),
        (["org.B.share=+10%", "org.B.share=+10%"], {"B": (60.5, {})}),  # applied in order
    ],
)
def test_org_overrides_change_exactly_the_named_share(overrides, changed):
    assert shares(apply_overrides(cfg(), overrides)) == {**BASE, **changed}


@pytest.mark.parametrize(
    "override, field, value",
    [
        ("policy.lookback=3d", "lookback_s", 3 * 86400.0),
        ("policy.epoch=1m", "epoch_s", 60.0),
        ("policy.grace=0", "grace_s", 0.0),
        ("policy.usage_mode=decay", "usage_mode", UsageMode.DECAY),
        ("policy.min_runtime_cap=4h", "min_runtime_cap_s", 4 * H),
        ("policy.idle_after=1h", "idle_after_s", H),
        ("policy.idle_util_below=10", "idle_util_pct", 10.0),
        ("policy.debug_allowance=1", "debug_allowance", 1.0),
        ("policy.debug_protection=30m", "debug_protection_s", 1800.0),
    ],
)
def test_policy_overrides_are_parsed_as_in_a_config_file(override, field, value):
    before = cfg().policy
    after = apply_overrides(cfg(), [override]).policy
    assert getattr(after, field) == value
    assert {k: v for k, v in vars(after).items() if k != field} == {
        k: v for k, v in vars(before).items() if k != field
    }


def test_solver_overrides_reach_the_solver_settings():
    pol = apply_overrides(cfg(), ["policy.solver.time_limit=5s", "policy.solver.backend=cbc"]).policy
    assert (pol.solver.time_limit_s, pol.solver.backend) == (5.0, "cbc")
    pol = apply_overrides(cfg(), ["policy.solver.exact_up_to=0"]).policy
    assert pol.solver.exact_up_to == 0  # a what-if of the loose gap on small epochs


def test_every_bad_override_is_reported_at_once_with_its_fix():
    with pytest.raises(ConfigError) as err:
        apply_overrides(
            cfg(),
            [
                "org.A.A3.share=4",
                "org.Aa.share=4",
                "org.A.share=-",
                "org.A.weight=3",
                "org.A.share_by_type.a100=1",
                "policy.lookbak=3d",
                "policy.lookback=soon",
                "org.A.share=-60",
                "budget.A=3",
                "nonsense",
            ],
        )
    assert err.value.problems == [
        "--set: org.A.A3.share=4: org node 'A3' is not a child of 'A'; children of 'A': A1, A2",
        "--set: org.Aa.share=4: org node 'Aa' is not a child of the root; did you mean A?",
        "--set: org.A.share=-: '-' is not a share; use a number >= 0, or +10% / -10% / *1.5 / +5",
        "--set: org.A.weight=3: an org override sets `share` or `share_by_type.<gpu_type>`; write org.<path>.share=<value>, e.g. org.A.A1.share=40",
        "--set: org.A.share_by_type.a100=1: gpu_type 'a100' is not configured; use one of h100, b200",
        "--set: policy.lookbak=3d: unknown policy key 'lookbak'; did you mean policy.lookback?",
        "--set policy.lookback=soon: policy.lookback: expected a duration, got a string ('soon'); write seconds (3600) or a duration like '90s', '15m', '8h', '7d', '1h30m'",
        "--set: org.A.share=-60: share would be -10 (< 0); shares are >= 0",
        "--set: budget.A=3: unknown section 'budget'; overrides start with org. or policy.",
        "--set: nonsense: expected KEY=VALUE; write e.g. org.A.A1.share=40 or policy.lookback=3d",
    ]


def test_zeroing_every_sibling_is_refused():
    with pytest.raises(ConfigError, match="every child of 'ai2' would have share 0"):
        apply_overrides(cfg(), ["org.A.share=0", "org.B.share=0"])


def contended() -> Scenario:
    """Two projects keep one 8-GPU node busy with 1-hour jobs (8 h of work each)."""
    c = cfg()
    c = Config(c.gpu_types[:1], c.nodes[:1], c.org, c.policy)
    jobs = []
    for k in range(8):
        for p in ("A1", "B1"):
            jobs.append(Job(f"{p}-{k}", p, 8, min_runtime_s=H, submit_time=0.0, duration_s=H))
    return Scenario("contended", c, tuple(jobs), duration_s=8 * H)


def test_a_bigger_budget_moves_gpu_time_to_the_project_that_got_it():
    wi = run_whatif(contended(), ["org.B.share=*4"], "greedy")
    base = wi.base_metrics["projects"]
    var = wi.variant_metrics["projects"]
    assert var["B1"]["delivered_gpu_h"] > base["B1"]["delivered_gpu_h"]
    assert var["A1"]["delivered_gpu_h"] < base["A1"]["delivered_gpu_h"]
    assert base["A1"]["delivered_gpu_h"] + base["B1"]["delivered_gpu_h"] == pytest.approx(64.0)
    assert var["A1"]["delivered_gpu_h"] + var["B1"]["delivered_gpu_h"] == pytest.approx(64.0)
    # the baseline is the plain simulation, and the variant is the plain simulation of the
    # changed config: what-if adds nothing of its own
    assert wi.base.intervals == simulate(contended(), make_policy("greedy")).intervals
    changed = with_config(contended(), apply_overrides(contended().config, ["org.B.share=*4"]))
    assert wi.variant.intervals == simulate(changed, make_policy("greedy")).intervals
    text = wi.format_diff()
    assert "greedy (base)" in text and "greedy (variant)" in text and "B1" in text
