"""An outside judge of what a user sees through the command line after real epochs (stop 59):
small clusters (2-3 nodes of 4 GPUs) driven by `optalloc submit`, `optalloc epoch --now T`
(the noop runner: starts are taken at once, a job with a --duration is reported finished
when its work is done, a preempted job is requeued at the epoch), `optalloc cancel` and
config edits, then `optalloc explain` (text and --json), `optalloc jobs` (--json, --all,
--wide), the plan file (--out) and `optalloc ledger report --json` checked against outcomes
and GPU-hours worked out by hand from README "How an epoch decides", "The plan file" and
"Seeing it" before each case was run (the comments give the arithmetic).

A case where the code disagrees with the hand outcome and the code is at fault is a strict
xfail whose reason names the cause (file:line, the numbers traced, a suggested fix); the
six it found were fixed at stop 59."""

from __future__ import annotations

import json
import textwrap

import pytest

from optalloc.cli import main

H = 3600.0

# ---------------------------------------------------------------------------- the lab


class Lab:
    """A lab directory with cfg.yaml and st.db; every command runs in-process."""

    def __init__(self, tmp_path, monkeypatch, capsys, config: str):
        monkeypatch.chdir(tmp_path)
        self.dir, self.capsys = tmp_path, capsys
        self.write("cfg.yaml", config)

    def write(self, name: str, text: str) -> None:
        (self.dir / name).write_text(textwrap.dedent(text))

    def run(self, *argv, rc: int = 0) -> tuple[str, str]:
        self.capsys.readouterr()
        got = main([str(a) for a in argv])
        out = self.capsys.readouterr()
        assert got == rc, (argv, got, out.out, out.err)
        return out.out, out.err

    def submit(self, jid, project, gpus, now, min_runtime="1h", *extra) -> None:
        self.run("submit", "--config", "cfg.yaml", "--state", "st.db", "--project", project,
                 "--gpus", gpus, "--min-runtime", min_runtime, "--id", jid, "--now", now,
                 *extra, "--", "true")

    def epoch(self, now, config="cfg.yaml") -> dict:
        self.run("epoch", "--config", config, "--state", "st.db", "--now", now,
                 "--out", "plan.json")
        return json.loads((self.dir / "plan.json").read_text())

    def jobs(self, *flags) -> dict[str, dict]:
        out, _ = self.run("jobs", "--state", "st.db", "--json", *flags)
        return {r["id"]: r for r in json.loads(out)}

    def explain(self, job, config="cfg.yaml") -> dict:
        out, _ = self.run("explain", job, "--config", config, "--state", "st.db", "--json")
        return json.loads(out)

    def explain_text(self, job, config="cfg.yaml", rc=0) -> str:
        out, err = self.run("explain", job, "--config", config, "--state", "st.db", rc=rc)
        return out + err

    def ledger(self, now, config="cfg.yaml") -> dict:
        out, _ = self.run("ledger", "report", "--config", config, "--state", "st.db",
                          "--now", now, "--json")
        doc = json.loads(out)
        return {"rows": {r["name"]: r for r in doc["rows"]}, "notes": doc["notes"]}


def placed(plan) -> dict[str, dict[str, list[int]]]:
    return {p["job_id"]: {a["node"]: a["gpus"] for a in p["nodes"]} for p in plan["placements"]}


def pending(plan) -> dict[str, str]:
    return {r["job_id"]: r["code"] for r in plan["pending"]}


def reason(plan, jid) -> dict:
    return next(r for r in plan["pending"] + plan["preemptions"] if r["job_id"] == jid)


def as_pairs(rows_placement) -> dict[str, list[int]]:
    return {a["node"]: a["gpus"] for a in rows_placement}


TWO_NODES = """
gpu_types: [{name: h100}]
nodes: [{name: "n[1-2]", gpu_type: h100, gpus: 4}]
org: {name: lab, children: [{name: A, share: 1}, {name: B, share: 1}]}
policy: {epoch: 5m, grace: 60s, lookback: 1d}
"""

# ---------------------------------------------------------------------------- 1. a gang


GANG = """
gpu_types: [{name: h100}]
nodes: [{name: "n[1-3]", gpu_type: h100, gpus: 4}]
org: {name: lab, children: [{name: A, share: 2}, {name: B, share: 1}]}
policy: {epoch: 5m, grace: 60s, lookback: 1d}
"""


def test_a_two_node_gang_runs_on_whole_nodes_and_the_waiting_gang_is_told_its_cut_target_and_nodes(
        tmp_path, monkeypatch, capsys):
    # 3 nodes x 4 = 12 h100. A share 2, B share 1: A entitled 8 GPUs, B 4. No history.
    # ag (A, 8 = 2 x 4, 2h) at t=0; b1 (B, 2, 2h) at t=0; bg (B, 8 = 2 x 4, 2h) at t=10.
    # Epoch t=600. Floors A min(8, 8) = 8, B min(10, 4) = 4; targets A 8, B 4 (no spare).
    # A: ag on two whole nodes (its floor). B's order: b1 first (2 GPUs), then bg (8) does
    # not fit the 4 left. b1 on the third node; its other 2 GPUs idle (nothing that waits
    # fits there). B's floor is short: floor_violations B/h100 got 2 of 4.
    # My first hand outcome said bg: OverShare against a target of 4. Wrong: README rule 1,
    # "the target this epoch is then below the floor ... where a project's whole jobs in its
    # own order fill less than its floor; a message that shows both says which cut it": B's
    # target is cut to the 2 its whole jobs fill, so bg waits below B's floor:
    # WaitingForCapacity, "2 of 4 GPUs; its target 2, cut below the floor", "needs 8 more",
    # "0 h100 GPUs are protected, 2 free", A "8 of target 8"; details targets h100
    # [B floor 4 got 2 target 2].
    # explain bg: free after the plan 0, 0 and 2 GPUs per node, so 0 nodes with 4 free:
    # both of bg's nodes must free up.
    # jobs: ag running on its two nodes, bg pending WaitingForCapacity with the plan's
    # message, waiting 600 - 10 = 590 s.
    # Epoch t=3600: all protected to 7800 (ag, b1: 600 + 2h): the same plan.
    # Ledger at 3600, tracked from the first demand sample (600), one 3000 s bin:
    # usage A 8 x 3000/3600 = 6.667, B 2 x 3000/3600 = 1.667; entitled (1d window) A 8 x 24
    # = 192, B 96; owed A min(8, 8) x 5/6 = 6.667, B min(4, 10) x 5/6 = 3.333;
    # delivered = met: A 6.667, B 1.667.
    lab = Lab(tmp_path, monkeypatch, capsys, GANG)
    lab.submit("ag", "A", 8, 0, "2h", "--gpus-per-node", "4")
    lab.submit("b1", "B", 2, 0, "2h")
    lab.submit("bg", "B", 8, 10, "2h", "--gpus-per-node", "4")
    plan = lab.epoch(600)

    runs = placed(plan)
    assert set(runs) == {"ag", "b1"} and plan["preemptions"] == []
    assert len(runs["ag"]) == 2 and all(g == [0, 1, 2, 3] for g in runs["ag"].values())
    (b1_node, b1_gpus), = runs["b1"].items()
    assert b1_node not in runs["ag"] and len(b1_gpus) == 2
    assert pending(plan) == {"bg": "WaitingForCapacity"}
    bg = reason(plan, "bg")
    for fact in ("B is below its h100 floor (2 of 4 GPUs; its target 2, cut below the floor",
                 "this job needs 8 more", "0 h100 GPUs are protected, 2 free",
                 "A (8 of target 8)"):
        assert fact in bg["message"]
    assert bg["details"]["targets"]["h100"] == [
        {"org": "B", "floor": 4.0, "got": 2.0, "target": 2.0}]
    assert [(f["org_node"], f["gpu_type"], f["floor_gpus"], f["got_gpus"])
            for f in plan["floor_violations"]] == [("B", "h100", 4.0, 2.0)]

    rows = lab.jobs()
    assert {j: r["state"] for j, r in rows.items()} == {
        "ag": "running", "b1": "running", "bg": "pending"}
    assert as_pairs(rows["ag"]["placement"]) == runs["ag"]
    assert rows["bg"]["code"] == "WaitingForCapacity" and rows["bg"]["message"] == bg["message"]
    assert rows["bg"]["wait_s"] == pytest.approx(590.0)
    wide, _ = lab.run("jobs", "--state", "st.db", "--wide")
    line = next(ln for ln in wide.splitlines() if ln.startswith("bg "))
    assert line.endswith("WaitingForCapacity: " + bg["message"])

    e = lab.explain("bg")
    assert (e["outcome"], e["code"], e["message"]) == (
        "pending", "WaitingForCapacity", bg["message"])
    assert e["changes"] == ["2 more h100 nodes with 4 free GPUs must free up (whole-node gang "
                            "of 2 nodes; 0 available)"]
    ea = lab.explain("ag")
    assert ea["outcome"] == "started" and ea["placement"]["nodes"] == runs["ag"]

    plan2 = lab.epoch(3600)
    assert placed(plan2) == runs and pending(plan2) == {"bg": "WaitingForCapacity"}
    led = lab.ledger(3600)["rows"]
    want = {"A": (8 * 3000 / H, 192.0, 8 * 3000 / H, 8 * 3000 / H),
            "B": (2 * 3000 / H, 96.0, 4 * 3000 / H, 2 * 3000 / H)}
    for p, (usage, entitled, owed, delivered) in want.items():
        r = led[p]
        assert (r["usage_gpu_h"], r["entitled_gpu_h"], r["owed_gpu_h"], r["delivered_gpu_h"],
                r["met_gpu_h"]) == pytest.approx((usage, entitled, owed, delivered, delivered))


# ---------------------------------------------------------------------------- 2-3. cancel


def _cancelled_after_an_epoch(lab):
    # 2 x 4 h100, A = B. a1 (A, 4) t=0, a2 (A, 4) t=10, b1 (B, 4) t=20, all 1h. Epoch 600:
    # floors 4 + 4: a1 and b1 take a node each; a2 would take A past its target of 4:
    # OverShare. Then a2 is cancelled before the next epoch.
    lab.submit("a1", "A", 4, 0)
    lab.submit("a2", "A", 4, 10)
    lab.submit("b1", "B", 4, 20)
    plan = lab.epoch(600)
    assert set(placed(plan)) == {"a1", "b1"} and pending(plan) == {"a2": "OverShare"}
    out, _ = lab.run("cancel", "a2", "--state", "st.db")
    assert out == "cancelled a2\n"
    assert lab.jobs("--all")["a2"]["state"] == "cancelled"
    return plan


# Fixed at stop 59 (was a strict xfail; the judge's diagnosis is in the commit).
def test_explain_of_a_job_cancelled_after_the_epoch_says_it_is_cancelled_not_still_waiting(
        tmp_path, monkeypatch, capsys):
    lab = Lab(tmp_path, monkeypatch, capsys, TWO_NODES)
    _cancelled_after_an_epoch(lab)
    text = lab.explain_text("a2")
    assert "cancelled" in text and "OverShare" not in text and "to start" not in text
    assert lab.explain("a2").get("outcome") == "cancelled"


RESERVE = """
gpu_types: [{name: h100}]
nodes: [{name: "n[1-2]", gpu_type: h100, gpus: 4}]
org: {name: lab, children: [{name: A, share: 1}, {name: G, share: 1}]}
policy: {epoch: 5m, grace: 60s, lookback: 1d, max_reservations: 1}
jobs:
  - {id: a1, project: A, gpus: 2, min_runtime: 2h, submit_time: 0, state: running, start_time: 0,
     placement: {gpu_type: h100, nodes: [{node: n1, gpus: [0, 1]}]}}
  - {id: a2, project: A, gpus: 2, min_runtime: 1h, submit_time: 0, state: running, start_time: 0,
     placement: {gpu_type: h100, nodes: [{node: n2, gpus: [0, 1]}]}}
  - {id: g1, project: G, gpus: 8, gpus_per_node: 4, min_runtime: 1h, submit_time: 100}
  - {id: a3, project: A, gpus: 2, min_runtime: 2h, submit_time: 200}
"""


def test_a_cancelled_reserved_gang_ends_its_reservation_and_the_held_job_starts_next_epoch(
        tmp_path, monkeypatch, capsys):
    # 2 x 4 h100, A = G, the lookahead on (one reservation). a1 (2 GPUs on n1, protected to
    # 7200) and a2 (2 on n2, to 3600) run; G's gang g1 (2 x 4) and A's a3 (2 GPUs, 2h) wait.
    # Epoch 600: g1 fits nowhere (2 free per node); it qualifies by borrowing (8 GPU x 1h
    # protected well inside G's 96 GPU-h a day): Reserved on n1 + n2, expected start when
    # a1's protection ends, 7200, plus its notice's 60 s = 7260. a3 would hold 2 free GPUs
    # to 600 + 2h = 7800, past 7260: HeldForReservation. The plan keeps a1 and a2 only.
    # explain g1: the two blockers (a1 to 7200, a2 to 3600), "it starts there at t=7260".
    # g1 is cancelled. Epoch 1200: reservations [] and reservations_ended [g1 cancelled on
    # n1, n2]; the idle GPUs it held (2 + 2 from 600 to 1200 = 0.667 GPU-h) are in
    # reservation_idle for G; a3 starts on 2 free GPUs; nothing pending. explain g1: not
    # in the queue, status cancelled (exit 2). Ledger at 1200: A usage 4 GPUs x 1200 s =
    # 1.333 (a3 just started), G 0; G owed min(4, 8) x 600 s = 0.667, delivered 0.
    lab = Lab(tmp_path, monkeypatch, capsys, RESERVE)
    plan = lab.epoch(600)
    assert placed(plan) == {"a1": {"n1": [0, 1]}, "a2": {"n2": [0, 1]}}
    assert pending(plan) == {"g1": "Reserved", "a3": "HeldForReservation"}
    (res,) = plan["reservations"]
    assert (res["job_id"], sorted(res["nodes"]), res["expected_start"], res["idle_gpus"]) == (
        "g1", ["n1", "n2"], 7260.0, 4)
    assert reason(plan, "a3")["details"]["hold_until"] == 7800.0
    rows = lab.jobs()
    assert rows["a3"]["code"] == "HeldForReservation"
    assert rows["a3"]["message"] == reason(plan, "a3")["message"]
    text = lab.explain_text("g1")
    for fact in ("reserved nodes n[1-2] for job g1", "a1 ends or loses protection at t=7200",
                 "a2 ends or loses protection at t=3600", "it starts there at t=7260"):
        assert fact in text

    lab.run("cancel", "g1", "--state", "st.db")
    plan = lab.epoch(1200)
    assert plan["reservations"] == [] and plan["pending"] == []
    (ended,) = plan["reservations_ended"]
    assert (ended["job_id"], ended["outcome"], sorted(ended["nodes"])) == (
        "g1", "cancelled", ["n1", "n2"])
    (idle,) = plan["reservation_idle"]
    assert (idle["job_id"], idle["project"], idle["start"], idle["end"]) == ("g1", "G", 600, 1200)
    assert idle["gpu_h"] == pytest.approx(4 * 600 / H)
    runs = placed(plan)
    assert set(runs) == {"a1", "a2", "a3"}
    (node, gpus), = runs["a3"].items()
    assert sorted(gpus) == [2, 3]
    rows = lab.jobs("--all")
    assert (rows["g1"]["state"], rows["a3"]["state"]) == ("cancelled", "running")
    assert "g1" not in lab.jobs()
    assert "its status: cancelled" in lab.explain_text("g1", rc=2)
    assert lab.explain("a3")["outcome"] == "started"
    led = lab.ledger(1200)["rows"]
    assert led["A"]["usage_gpu_h"] == pytest.approx(4 * 1200 / H)
    assert led["G"]["usage_gpu_h"] == 0.0 and led["G"]["delivered_gpu_h"] == 0.0
    assert led["G"]["owed_gpu_h"] == pytest.approx(4 * 600 / H)


# ---------------------------------------------------------------------------- 4-5. finished


FINISH = TWO_NODES.replace("epoch: 5m", "epoch: 1h")


def _finish_between_epochs(lab) -> dict:
    # 2 x 4 h100, A = B, hourly epochs. a1 (A, 4, 1h, 1.5h of work) t=0; b1 (B, 4, 1h) t=0;
    # b2 (B, 4, 1h) t=5.
    # Epoch 0: a1 and b1 take a node each; b2 would take B past its target 4: OverShare.
    # Epoch 3600: a1 and b1 are past protection, usage 4 GPU-h each, targets still 4 + 4:
    # the same plan. a1 finishes at 0 + 1.5 h = 5400 (the noop runner reports it then).
    # Epoch 7200: a1 observed finished at 5400; b2 starts on a1's node; b1 kept.
    lab.submit("a1", "A", 4, 0, "1h", "--duration", "1h30m")
    lab.submit("b1", "B", 4, 0)
    lab.submit("b2", "B", 4, 5)
    p0 = lab.epoch(0)
    assert set(placed(p0)) == {"a1", "b1"} and pending(p0) == {"b2": "OverShare"}
    p1 = lab.epoch(3600)
    assert placed(p1) == placed(p0) and pending(p1) == {"b2": "OverShare"}
    p2 = lab.epoch(7200)
    assert placed(p2) == {"b1": placed(p0)["b1"], "b2": placed(p0)["a1"]}
    assert p2["pending"] == [] and p2["preemptions"] == []
    return p2


def test_a_job_that_finishes_between_epochs_is_charged_to_its_exact_end_and_frees_its_node(
        tmp_path, monkeypatch, capsys):
    # Views after the epoch at 7200: jobs --all: a1 finished, b2 running since 7200 on a1's
    # node; explain a1: not in that epoch's queue, status finished (exit 2).
    # Ledger at 7200: A usage = delivered = 4 x 1.5 h = 6.0 (to its exact end, not to the
    # epoch that saw it); B usage = delivered = b1 4 x 2 h = 8.0 (b2 from 7200: 0); entitled
    # 4 x 24 = 96 each; B owed min(4, 8) x 2 h = 8, met 8.
    lab = Lab(tmp_path, monkeypatch, capsys, FINISH)
    _finish_between_epochs(lab)
    rows = lab.jobs("--all")
    assert {j: r["state"] for j, r in rows.items()} == {
        "a1": "finished", "b1": "running", "b2": "running"}
    assert rows["b2"]["start"] == 7200.0
    assert "its status: finished" in lab.explain_text("a1", rc=2)
    led = lab.ledger(7200)["rows"]
    assert (led["A"]["usage_gpu_h"], led["A"]["delivered_gpu_h"]) == pytest.approx((6.0, 6.0))
    assert (led["B"]["usage_gpu_h"], led["B"]["delivered_gpu_h"]) == pytest.approx((8.0, 8.0))
    assert (led["A"]["entitled_gpu_h"], led["B"]["entitled_gpu_h"]) == (96.0, 96.0)
    assert (led["B"]["owed_gpu_h"], led["B"]["met_gpu_h"]) == pytest.approx((8.0, 8.0))


def test_the_ledger_owes_a_finished_project_nothing_after_its_jobs_exact_end(
        tmp_path, monkeypatch, capsys):
    # Hour 0 (0-3600): A asks 4 (a1), entitled 4: owed 4, delivered 4. Hour 1 (3600-7200):
    # A asks 4 until a1's end at 5400, then nothing: owed 4 x 0.5 h = 2, delivered 2.
    # A owed 6, delivered 6, met 6: met/owed 100%, period 100%.
    lab = Lab(tmp_path, monkeypatch, capsys, FINISH)
    _finish_between_epochs(lab)
    a = lab.ledger(7200)["rows"]["A"]
    assert (a["owed_gpu_h"], a["delivered_gpu_h"], a["met_gpu_h"]) == pytest.approx(
        (6.0, 6.0, 6.0))
    assert a["met_owed"] == pytest.approx(1.0)


# ---------------------------------------------------------------------------- 6. speed, billing


SPEED = """
gpu_types: [{name: h100, billing_weight: 1.0}, {name: b200, billing_weight: 2.0}]
nodes:
  - {name: h1, gpu_type: h100, gpus: 4}
  - {name: b1, gpu_type: b200, gpus: 4}
org: {name: lab, children: [{name: A, share: 1}, {name: B, share: 1}]}
policy: {epoch: 1h, grace: 60s, lookback: 1d}
jobs:
  - {id: fast, project: A, gpus: 4, gpu_types: [b200], speedup: {b200: 2.0}, min_runtime: 30m,
     duration: 2h, submit_time: 0}
  - {id: slow, project: B, gpus: 4, gpu_types: [h100], min_runtime: 30m, duration: 2h,
     submit_time: 0}
"""


def test_a_job_twice_as_fast_on_its_type_ends_in_half_the_time_and_is_charged_that_types_weight(
        tmp_path, monkeypatch, capsys):
    # h100 x 4 (weight 1) + b200 x 4 (weight 2); A = B (per-type budgets: each 2 of each).
    # fast (A, 4 on b200, speedup 2, 2 h of work) and slow (B, 4 on h100, 2 h) start at 0.
    # fast ends at 0 + 2 h / 2 = 3600 (seen by the epoch at 3600), slow at 7200.
    # Ledger at 7200: usage is billing-weighted: A 4 x 1 h x 2 = 8.0, B 4 x 2 h x 1 = 8.0;
    # entitled (4 x 1 + 4 x 2) x 24 h x 0.5 = 144 each; delivered is plain GPU-h: A 4.0,
    # B 8.0; owed (plain; A asks 4 in hour 0 only, B 4 in both): A 4, B 8; met = owed.
    lab = Lab(tmp_path, monkeypatch, capsys, SPEED)
    p0 = lab.epoch(0)
    assert placed(p0) == {"fast": {"b1": [0, 1, 2, 3]}, "slow": {"h1": [0, 1, 2, 3]}}
    p1 = lab.epoch(3600)
    assert placed(p1) == {"slow": {"h1": [0, 1, 2, 3]}}
    assert {j: r["state"] for j, r in lab.jobs("--all").items()} == {
        "fast": "finished", "slow": "running"}
    lab.epoch(7200)
    assert {j: r["state"] for j, r in lab.jobs("--all").items()} == {
        "fast": "finished", "slow": "finished"}
    led = lab.ledger(7200)["rows"]
    for p, (usage, delivered, owed) in {"A": (8.0, 4.0, 4.0), "B": (8.0, 8.0, 8.0)}.items():
        r = led[p]
        assert (r["usage_gpu_h"], r["entitled_gpu_h"], r["delivered_gpu_h"], r["owed_gpu_h"],
                r["met_gpu_h"]) == pytest.approx((usage, 144.0, delivered, owed, owed)), p
        assert r["ratio"] == pytest.approx(usage / 144.0)


# ---------------------------------------------------------------------------- 7. unallocated


FILL = TWO_NODES.replace("name: B, share: 1", "name: B, share: 3")


def test_idle_gpus_are_shared_among_unallocated_work_by_share_and_none_of_it_is_charged(
        tmp_path, monkeypatch, capsys):
    # 2 x 4 h100, A share 1, B share 3, no allocated work. Each project submits four 2-GPU
    # unallocated jobs (min_runtime 0) at t=0. Rule 4: the 8 idle GPUs are split by the
    # targets' water-filling, shares 1 : 3 -> A 2, B 6: ua1, ub1, ub2, ub3 start (each
    # team in its own order); ua2-ua4 and ub4 wait: UnallocatedYields, told their project's
    # share ("A's share is 2 GPUs, it runs 2", "B's share is 6 GPUs, it runs 6") and 0 free.
    # explain ua2: 2 GPUs must free up on one node (largest free block 0) with no allocated
    # job wanting them, or a min_runtime > 0. jobs: every row unallocated.
    # A second epoch an hour later keeps the same four. Ledger at 4200: no usage, nothing
    # owed (unallocated work asks for no share), nothing delivered.
    lab = Lab(tmp_path, monkeypatch, capsys, FILL)
    for p in "ab":
        for k in range(1, 5):
            lab.submit(f"u{p}{k}", p.upper(), 2, 0, "0")
    plan = lab.epoch(600)
    assert set(placed(plan)) == {"ua1", "ub1", "ub2", "ub3"}
    assert all(not p["allocated"] for p in plan["placements"])
    assert pending(plan) == {j: "UnallocatedYields" for j in ("ua2", "ua3", "ua4", "ub4")}
    for j, fact in (("ua2", "A's share is 2 GPUs, it runs 2"),
                    ("ub4", "B's share is 6 GPUs, it runs 6")):
        assert fact in reason(plan, j)["message"] and "h100: 0 free" in reason(plan, j)["message"]
    rows = lab.jobs()
    assert all(r["allocated"] is False for r in rows.values())
    assert rows["ub4"]["message"] == reason(plan, "ub4")["message"]
    e = lab.explain("ua2")
    assert e["changes"] == [
        "2 GPUs of h100 must free up on one node (largest free block: 0), with no allocated "
        "job wanting them",
        "or give the job a min_runtime > 0 (an allocated job, charged to the budget)"]
    plan2 = lab.epoch(4200)
    assert placed(plan2) == placed(plan)
    led = lab.ledger(4200)["rows"]
    for org in ("lab", "A", "B"):
        assert (led[org]["usage_gpu_h"], led[org]["owed_gpu_h"],
                led[org]["delivered_gpu_h"]) == (0.0, 0.0, 0.0), org


# ---------------------------------------------------------------------------- 8-10. removed


REMOVED = """
gpu_types: [{name: h100}]
nodes: [{name: "n[1-2]", gpu_type: h100, gpus: 4}]
org: {name: lab, children: [{name: A, share: 1}, {name: B, share: 1}, {name: C, share: 2}]}
policy: {epoch: 5m, grace: 60s, lookback: 1d}
"""


def _project_removed(lab) -> dict:
    # 2 x 4 h100; A 1, B 1, C 2. C's c1 (4, 2h) t=0 and c2 (4, 2h) t=10 start at the epoch
    # at 0 (C alone asks: its target is the whole cluster), a node each, protected to 7200.
    # Then C's c3 (4) is submitted (t=100), A's a1 (4, 1h) (t=200), and C is removed from
    # the config. Epoch 3600: c3 is held (UnknownProject). c1 and c2 keep running as a
    # zero-share project's work: unallocated, never protected (rule 4: a type where the
    # project has no share), so a1 (A's floor 4) evicts one at once, inside its min_runtime:
    # of the two equal jobs the one C's order ranks last, c2 (submitted later):
    # PreemptedUnallocated for a1, and a1 takes c2's node. c1 stays, unallocated.
    lab.submit("c1", "C", 4, 0, "2h")
    lab.submit("c2", "C", 4, 10, "2h")
    p0 = lab.epoch(0)
    assert set(placed(p0)) == {"c1", "c2"}
    lab.submit("c3", "C", 4, 100, "2h")
    lab.submit("a1", "A", 4, 200)
    lab.write("new.yaml", REMOVED.replace(", {name: C, share: 2}", ""))
    p1 = lab.epoch(3600, "new.yaml")
    return p0, p1


def test_a_removed_projects_queued_job_is_held_and_its_running_work_yields_to_a_project_with_a_share(
        tmp_path, monkeypatch, capsys):
    # (the hand outcome at 3600 is in _project_removed)
    # Views after 3600: jobs: c1 running, c2 preempted (PreemptedUnallocated, the plan's
    # message), c3 pending UnknownProject, a1 running on c2's node. explain c3: held, with
    # the project named; explain c2: preempted for a1, 60 s grace.
    # Epoch 4200: c2 was requeued (resumable) and is now a queued job of a removed project:
    # held too; c1 and a1 stay.
    lab = Lab(tmp_path, monkeypatch, capsys, REMOVED)
    p0, p1 = _project_removed(lab)
    assert placed(p1) == {"c1": placed(p0)["c1"], "a1": placed(p0)["c2"]}
    assert {p["job_id"]: p["allocated"] for p in p1["placements"]} == {"c1": False, "a1": True}
    assert [(p["job_id"], p["code"], p["needed_by"]) for p in p1["preemptions"]] == [
        ("c2", "PreemptedUnallocated", ["a1"])]
    assert pending(p1) == {"c3": "UnknownProject"}
    assert "its project 'C' is not in the org tree" in reason(p1, "c3")["message"]

    rows = lab.jobs()
    assert {j: (r["state"], r["code"]) for j, r in rows.items()} == {
        "c1": ("running", None), "c2": ("preempted", "PreemptedUnallocated"),
        "c3": ("pending", "UnknownProject"), "a1": ("running", None)}
    assert rows["c2"]["message"] == reason(p1, "c2")["message"]
    text = lab.explain_text("c3", "new.yaml")
    assert text.startswith("c3: held (UnknownProject): ")
    e = lab.explain("c2", "new.yaml")
    assert (e["outcome"], e["code"], e["needed_by"], e["grace_s"]) == (
        "preempted", "PreemptedUnallocated", ["a1"], 60.0)

    p2 = lab.epoch(4200, "new.yaml")
    assert placed(p2) == placed(p1)
    assert pending(p2) == {"c2": "UnknownProject", "c3": "UnknownProject"}
    assert lab.explain_text("c2", "new.yaml").startswith("c2: held (UnknownProject): ")


# Fixed at stop 59 (was a strict xfail; the judge's diagnosis is in the commit).
def test_jobs_shows_a_removed_projects_running_job_as_the_plan_runs_it_unallocated_and_unprotected(
        tmp_path, monkeypatch, capsys):
    # c1 kept at 3600 as unallocated work of a zero-share project: jobs --json must say
    # allocated false and no protection end (c2, just as protected, was preempted).
    lab = Lab(tmp_path, monkeypatch, capsys, REMOVED)
    _project_removed(lab)
    c1 = lab.jobs()["c1"]
    assert (c1["allocated"], c1["protected_until"]) == (False, None)


# Fixed at stop 59 (was a strict xfail; the judge's diagnosis is in the commit).
def test_the_ledger_report_notes_every_gpu_hour_of_a_removed_project_running_ones_included(
        tmp_path, monkeypatch, capsys):
    # Ledger at 3600 on the new config: rows lab, A, B only (A's a1 just started: 0); the
    # note names C's 8 GPU-h: c1 4 x (3600 - 0) + c2 4 x (3600 - 0), both allocated runs
    # while C had its share.
    lab = Lab(tmp_path, monkeypatch, capsys, REMOVED)
    _project_removed(lab)
    led = lab.ledger(3600, "new.yaml")
    assert set(led["rows"]) == {"lab", "A", "B"}
    assert led["rows"]["lab"]["usage_gpu_h"] == 0.0
    assert led["notes"] == [
        "8.0 GPU-h of projects or gpu_types no longer in the config are not shown"]


# ---------------------------------------------------------------------------- 11. share change


# Fixed at stop 59 (was a strict xfail; the judge's diagnosis is in the commit).
def test_explain_after_a_share_change_without_an_epoch_still_states_the_epochs_entitlement(
        tmp_path, monkeypatch, capsys):
    # The epoch at 600 of cases 2-3 (A = B: A entitled 0.5 of 8 = 4, a2 OverShare). A's
    # share is then raised to 3 in the config, no epoch run. explain a2 explains the epoch
    # at 600: its message says "entitled 4.0", so its rank inputs say 0.5.
    lab = Lab(tmp_path, monkeypatch, capsys, TWO_NODES)
    lab.submit("a1", "A", 4, 0)
    lab.submit("a2", "A", 4, 10)
    lab.submit("b1", "B", 4, 20)
    plan = lab.epoch(600)
    assert "entitled 4.0" in reason(plan, "a2")["message"]
    lab.write("cfg.yaml", TWO_NODES.replace("name: A, share: 1", "name: A, share: 3"))
    e = lab.explain("a2")
    assert e["message"] == reason(plan, "a2")["message"]
    assert e["rank_inputs"]["path"][0]["entitlement"] == {"h100": 0.5}


# ---------------------------------------------------------------------------- 12. programs


PROGRAMS = """
gpu_types: [{name: h100}]
nodes: [{name: "n[1-2]", gpu_type: h100, gpus: 4}]
org: {name: lab, children: [{name: P, share: 1, children: [{name: A, share: 1}, {name: B, share: 1}]},
                            {name: Q, share: 1, children: [{name: C}]}]}
policy: {epoch: 1h, grace: 60s, lookback: 1d}
jobs:
  - {id: a1, project: A, gpus: 4, min_runtime: 8h, submit_time: 0, state: running, start_time: 0,
     placement: {gpu_type: h100, nodes: [{node: n1, gpus: [0, 1, 2, 3]}]}}
  - {id: c1, project: C, gpus: 4, min_runtime: 8h, submit_time: 0, state: running, start_time: 0,
     placement: {gpu_type: h100, nodes: [{node: n2, gpus: [0, 1, 2, 3]}]}}
  - {id: b1, project: B, gpus: 2, min_runtime: 1h, submit_time: 0}
"""


def test_a_programs_ledger_row_sums_its_projects_so_one_projects_surplus_never_covers_a_siblings_shortfall(
        tmp_path, monkeypatch, capsys):
    # 2 x 4 h100; P {A, B} and Q {C} equal: entitled A 2, B 2, C 4 GPUs. a1 (A, 4) and c1
    # (C, 4) run protected to 8 h from 0; B's b1 (2) waits (every GPU is protected: no plan
    # can start it; its reason is the next case's). Ledger at 3600, one tracked hour: owed
    # A min(2, 4) = 2, B min(2, 2) = 2, C 4; delivered A 4, B 0, C 4; met A 2, B 0, C 4.
    # P sums its projects: owed 4, delivered 4, met 2 (50%; period (2 + 0) / 4 = 50%: A's
    # surplus does not cover B); root owed 8, delivered 8, met 6 (75%). Usage A 4, B 0, C 4,
    # P 4, Q 4; entitled A 48, B 48, C 96, P 96, Q 96: ratios A 0.0833, B 0, P = Q = C
    # 0.0417. explain b1 (its message the plan's) and jobs --json (with --config) state the
    # ratios the ledger report gives at 3600; B's floor shows as unmet (0 of 2).
    lab = Lab(tmp_path, monkeypatch, capsys, PROGRAMS)
    lab.epoch(0)
    plan = lab.epoch(3600)
    assert set(placed(plan)) == {"a1", "c1"} and set(pending(plan)) == {"b1"}
    assert plan["preemptions"] == []
    assert [(f["org_node"], f["floor_gpus"], f["got_gpus"]) for f in plan["floor_violations"]] \
        == [("B", 2.0, 0.0)]
    led = lab.ledger(3600)["rows"]
    want = {  # owed, delivered, met, met_owed, period, usage, entitled
        "lab": (8, 8, 6, 0.75, 0.75, 8, 192), "P": (4, 4, 2, 0.5, 0.5, 4, 96),
        "A": (2, 4, 2, 1.0, 1.0, 4, 48), "B": (2, 0, 0, 0.0, 0.0, 0, 48),
        "Q": (4, 4, 4, 1.0, 1.0, 4, 96), "C": (4, 4, 4, 1.0, 1.0, 4, 96)}
    for org, w in want.items():
        r = led[org]
        assert (r["owed_gpu_h"], r["delivered_gpu_h"], r["met_gpu_h"], r["met_owed"],
                r["period_owed"], r["usage_gpu_h"], r["entitled_gpu_h"]) == pytest.approx(w), org
    e = lab.explain("b1")
    assert e["outcome"] == "pending" and e["message"] == reason(plan, "b1")["message"]
    assert {x["org"]: x["usage_ratio"] for x in e["rank_inputs"]["path"]} == pytest.approx(
        {"P": led["P"]["ratio"], "B": led["B"]["ratio"]})
    out, _ = lab.run("jobs", "--state", "st.db", "--config", "cfg.yaml", "--json")
    b1 = next(r for r in json.loads(out) if r["id"] == "b1")
    assert b1["ratios"] == pytest.approx({"P": 4 / 96, "B": 0.0})


# Fixed at stop 59 (was a strict xfail; the judge's diagnosis is in the commit).
def test_a_programs_project_kept_off_by_protected_jobs_alone_is_told_capacity_not_its_programs_share(
        tmp_path, monkeypatch, capsys):
    # The cluster of the case above at 3600. All 8 GPUs are held by protected jobs (a1, c1 to
    # 28800); B is below its floor (0 of 2), its target cut to 0 because A's protected 4
    # exceed A's floor of 2 (README rule 1: the floors share what is left in proportion).
    # Nothing but protection keeps b1 off (P at its target 4, Q at its 4, all protected): by
    # the flat rule (stop 52) WaitingForCapacity, "B is below its h100 floor (0 of 2 GPUs; its
    # target 0, cut below the floor this epoch: protected jobs hold more GPUs than their
    # projects' floors (A 4 of floor 2) ...) and this job needs 2 more: 8 h100 GPUs are
    # protected (the first protection ends at t=28800), 0 free".
    lab = Lab(tmp_path, monkeypatch, capsys, PROGRAMS)
    lab.epoch(0)
    plan = lab.epoch(3600)
    assert pending(plan) == {"b1": "WaitingForCapacity"}
    msg = reason(plan, "b1")["message"]
    for fact in ("B is below its h100 floor (0 of 2 GPUs", "(A 4 of floor 2)",
                 "8 h100 GPUs are protected (the first protection ends at t=28800), 0 free"):
        assert fact in msg


# ---------------------------------------------------------------------------- 13. priority


def test_a_higher_priority_teammate_takes_a_running_jobs_place_and_explain_jobs_and_ledger_agree(
        tmp_path, monkeypatch, capsys):
    # 2 x 4 h100, A = B. a1 (A, 4, 1h) and b1 (B, 4, 1h) start at 0, a node each. A's a2
    # (4 GPUs, priority 5) is submitted at 1000. Epoch 4000: a1 is past its protection
    # (3600); rule 3: it yields to a waiting teammate with a strictly higher priority that
    # fits its place: a1 PreemptedForFairShare for a2 ("priority 5 > 0"), a2 on a1's node,
    # b1 kept (B within its target). explain a1: GPUs taken by a2; notice now, 60 s grace,
    # stops by t=4060, then requeued (resumable). jobs: a1 preempted with the plan's words.
    # Epoch 4600: a1 (requeued at 4000 by the noop runner) waits while a2, ranked above it
    # in A's order, holds A's target of 4: LowerPriorityInProject naming a2.
    # Ledger at 4600: A a1 4 x 4000 s + a2 4 x 600 s = 5.111, B b1 4 x 4600 s = 5.111.
    lab = Lab(tmp_path, monkeypatch, capsys, TWO_NODES)
    lab.submit("a1", "A", 4, 0)
    lab.submit("b1", "B", 4, 0)
    p0 = lab.epoch(0)
    lab.submit("a2", "A", 4, 1000, "1h", "--priority", "5")
    p1 = lab.epoch(4000)
    assert placed(p1) == {"b1": placed(p0)["b1"], "a2": placed(p0)["a1"]}
    (pre,) = p1["preemptions"]
    assert (pre["job_id"], pre["code"], pre["needed_by"], pre["grace_s"]) == (
        "a1", "PreemptedForFairShare", ["a2"], 60.0)
    assert "priority 5 > 0" in pre["message"] and p1["pending"] == []
    text = lab.explain_text("a1")
    assert "GPUs taken by: a2" in text
    assert "notice now, 60 s grace: it stops by t=4060, then requeued" in text
    row = lab.jobs()["a1"]
    assert (row["state"], row["code"], row["message"]) == (
        "preempted", "PreemptedForFairShare", pre["message"])

    p2 = lab.epoch(4600)
    assert placed(p2) == placed(p1) and pending(p2) == {"a1": "LowerPriorityInProject"}
    assert "a2" in reason(p2, "a1")["message"]
    assert lab.explain("a1")["code"] == "LowerPriorityInProject"
    led = lab.ledger(4600)["rows"]
    assert led["A"]["usage_gpu_h"] == pytest.approx(4 * 4600 / H)
    assert led["B"]["usage_gpu_h"] == pytest.approx(4 * 4600 / H)
