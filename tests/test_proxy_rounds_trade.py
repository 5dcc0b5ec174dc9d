"""The rounds of the team's order by proxy (optalloc.epoch_status.kept_over_proxies): each
round keeps the running jobs the last one's plan stops by proxy, and may leave others so
(DESIGN.md section 8, rule 3). Until stop 55 a round had to leave fewer; on the bench's
1,024-GPU seed 121 (its MIP stopped by the time limit, so the path comes and goes with the
machine's speed: replayed from the chosen plan) keeping j00096 undid its teammate j01731 and
left j00178 stopped by proxy, one for one, so the rounds stopped and the epoch's plan stopped
j00096 while j01731 took the GPUs that j00096's GPU's new holder fitted on; a second round
keeps j00178 and leaves none. Now a round goes on where it leaves no more such jobs and not a
set an earlier round left (no cycle). The repair itself is stubbed here: each plan is a name,
each round's plan and the jobs it stops by proxy are given."""

from __future__ import annotations

import pytest

import optalloc.epoch_status as es

#: (name, the rounds allowed, per plan: (the jobs it stops by proxy, the next round's plan),
#:  the plan returned, how many kept in all): plan "p0" is the chosen one
CASES = [
    ("a round that trades one job stopped by proxy for another goes on to one that leaves none",
     3, {"p1": ({"j00096"}, "p2"), "p2": ({"j00178"}, "p3"), "p3": (set(), None)}, "p3", 3),
    ("a round that leaves more jobs stopped by proxy is not taken",
     3, {"p1": ({"a"}, "p2"), "p2": ({"b", "c"}, "p3"), "p3": (set(), None)}, "p1", 1),
    ("a round that leaves the jobs an earlier round left ends the rounds",
     3, {"p1": ({"a"}, "p2"), "p2": ({"b"}, "p3"), "p3": ({"a"}, "p4"), "p4": (set(), None)},
     "p2", 2),
    ("a round that leaves fewer is taken, as before",
     3, {"p1": ({"a", "b"}, "p2"), "p2": ({"b"}, "p3"), "p3": (set(), None)}, "p3", 3),
    ("without rounds the first repair's plan is returned",
     0, {"p1": ({"a"}, "p2"), "p2": (set(), None)}, "p1", 1),
    ("the rounds stop at their number",
     1, {"p1": ({"a"}, "p2"), "p2": ({"b"}, "p3"), "p3": (set(), None)}, "p2", 2),
]


@pytest.mark.parametrize("name,rounds,plans,want,n_kept", CASES, ids=[c[0] for c in CASES])
def test_the_rounds_go_on_while_they_leave_no_more_and_no_set_again(
        name, rounds, plans, want, n_kept, monkeypatch):
    nxt = {"p0": "p1", **{p: after for p, (_, after) in plans.items()}}

    def keep_over_proxies(em, placed):
        return None if nxt.get(placed) is None else (1, nxt[placed])

    monkeypatch.setattr(es, "keep_over_proxies", keep_over_proxies)
    monkeypatch.setattr(es, "proxy_breaks", lambda em, placed: set(plans[placed][0]))
    assert es.kept_over_proxies(None, "p0", rounds) == (n_kept, want)
