"""An outside judge's cases for the YAML doors (stop 52): budget configs and scenario files
through the command line (`validate`, `epoch --config`, `simulate`/`whatif`/`sweep --scenario`,
`ledger report --config`, `submit` job files).

By the project's rule each refusal is exit status 2, one message naming the file and key path
and what to do, no traceback, nothing on stdout, and nothing written: every file under the lab
directory is byte for byte as it was, no state DB, lock or report appears (`refused_in_lab`).
FAULTS were wrong before this stop (each row says how); RIGHT were right already and stay so;
the last tests are inputs that are fine and must stay accepted.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from optalloc.cli import main
from tests.test_cli_judge_cases_s51 import files
from tests.test_hostile_input import CONFIG, refused_in_lab

GPU = "gpu_types: [{name: h100}]\nnodes: [{name: box, gpu_type: h100, gpus: 4}]\n"
ORG = "org: {name: lab, children: [{name: A1, share: 1}, {name: B1, share: 1}]}\n"
EPOCH = ["epoch", "--config", "cfg.yaml", "--state", "st.db", "--now", "1000"]
SIMULATE = ["simulate", "--scenario", "sc.yaml", "--policies", "greedy", "--no-progress",
            "--out", "o"]
SWEEP = ["sweep", "--scenario", "sc.yaml", "--policies", "greedy", "--jobs", "1",
         "--no-progress", "--out", "o", "--grid", "org.A1.share=1,2"]
SUBMIT = ["submit", "--config", "cfg.yaml", "--state", "st.db", "jobs.yaml"]
JOBS_SCENARIO = GPU + ORG + textwrap.dedent(
    """
    jobs: [{id: a1, project: A1, gpus: 2, min_runtime: 1h, submit_time: 0, duration: 2h}]
    workload: {source: jobs}
    """
)
ITP_SCENARIO = textwrap.dedent(
    """
    gpu_types: [{name: a100}]
    nodes: [{name: "a100-[01-04]", gpu_type: a100, gpus: 8}]
    org: {name: r, children: [{name: a}, {name: b}]}
    simulation: {duration: 1d, seed: 1}
    workload: {source: itp, file: t.csv}
    """
)
ITP_CSV = "job_id,submission_time,duration,num_gpu\n" + "".join(
    f"j{i},{i * 600},3600,{i % 4 + 1}\n" for i in range(1, 41))
# a Philly folder of one team, with the throughputs of its one job type (self-contained)
PHILLY_SCENARIO = textwrap.dedent(
    """
    gpu_types: [{name: v100}]
    nodes: [{name: "v-[1-2]", gpu_type: v100, gpus: 8}]
    org: {name: r, children: [{name: t1}, {name: t2}]}
    simulation: {duration: 1d, seed: 1}
    """
)
PHILLY_TRACE = "Transformer\tcmd\t-step\t1\t1000\t0.0\t1\nTransformer\tcmd\t-step\t1\t1000\t60.0\t2\n"
PHILLY_THROUGHPUTS = json.dumps({"v100": {"('Transformer', 1)": {"null": 10.0}}})




def org_chain(levels: int) -> str:
    """An org tree whose project `leaf` sits `levels` levels below the root (beside `other`)."""
    chain = "".join(f"{{name: n{i}, children: [" for i in range(levels - 1))
    return ("org: {name: root, children: [" + chain + "{name: leaf}" + "]}" * (levels - 1)
            + ", {name: other}]}\n")


def state_with_an_epoch(lab: Path) -> None:
    assert main(EPOCH) == 0


# ---------------------------------------------------------------------- faults (fixed)

FAULTS = [
    ("an org tree 17 levels deep is refused at the children that go too deep",
     # was accepted; each level weighs 2x the one below in the objective, so at ~60 levels
     # every epoch ran DEGRADED ("highs: error") and at ~56 lost its optimality proof
     files(**{"cfg.yaml": GPU + org_chain(17)}), ["validate", "cfg.yaml"],
     ["cfg.yaml: org.children[0]" + ".children[0]" * 15 + ".children: the org tree is deeper "
      "than 16 levels below the root; flatten it"]),
    ("an org tree 60 levels deep is refused by epoch before any state exists",
     files(**{"cfg.yaml": GPU + org_chain(60) + "jobs: [{id: j, project: other, gpus: 1}]\n"}),
     EPOCH, ["the org tree is deeper than 16 levels below the root"]),
    ("node ranges split over entries that add up past 100000 nodes are refused once",
     # was accepted: 40 entries of h[0-99999] validated as 4,000,000 nodes (23 s, 1 GB)
     files(**{"cfg.yaml": "gpu_types: [{name: h100}]\nnodes:\n" + "".join(
         f"  - {{name: 'r{i}-[00001-60000]', gpu_type: h100, gpus: 8}}\n" for i in range(3))
         + ORG}),
     ["validate", "cfg.yaml"],
     ["1 problem found", "cfg.yaml: nodes[1].name: the cluster would have more than 100000 "
      "nodes (60000 before this entry, 60000 in it); check the ranges"]),
    ("a simulation.seed past 2**63 - 1 is refused by simulate as sweep refuses it",
     # was run by simulate (and validate) but refused by sweep as "--seeds: (not given): ..."
     files(**{"sc.yaml": JOBS_SCENARIO + "simulation: {duration: 4h, seed: 99999999999999999999}\n"}),
     SIMULATE, ["sc.yaml: simulation.seed: must be <= 9223372036854775807, got 99999999999999999999"]),
    ("a sweep names the simulation.seed key past 2**63 - 1, not a --seeds flag never given",
     files(**{"sc.yaml": JOBS_SCENARIO + "simulation: {duration: 4h, seed: 99999999999999999999}\n"}),
     SWEEP, ["sc.yaml: simulation.seed: must be <= 9223372036854775807"]),
    ("workload mapping project weights of 1e308 are refused",
     # was accepted: their sum overflowed to inf, every job went to the last project
     files(**{"sc.yaml": ITP_SCENARIO.replace(
         "file: t.csv", "file: t.csv, mapping: {projects: {a: 1.0e+308, b: 1.0e+308}}"),
         "t.csv": ITP_CSV}),
     SIMULATE, ["sc.yaml: workload.mapping.projects.a: must be <= 1e+09, got 1e+308",
                "sc.yaml: workload.mapping.projects.b: must be <= 1e+09"]),
    ("a Philly team listed twice is refused",
     # was read twice: its job ids repeated, and half of its jobs never ran ("completed 2" of 4)
     files(**{"sc.yaml": PHILLY_SCENARIO + "workload: {source: philly, file: pv, teams: [t1, t1]}\n",
              "pv__t1.trace": PHILLY_TRACE, "pv__simulation_throughputs.json": PHILLY_THROUGHPUTS}),
     SIMULATE, ["sc.yaml: workload.teams[1]: team 't1' is listed twice (also at "
                "workload.teams[0]); list each team once"]),
    ("a synthetic team listed twice is refused",
     files(**{"sc.yaml": GPU + ORG + "workload: {source: synthetic, synthetic: {teams: [A1, B1, A1]}}\n"
              "simulation: {duration: 1d}\n"}),
     ["validate", "sc.yaml"], ["sc.yaml: workload.synthetic.teams[2]: team 'A1' is listed twice"]),
    ("submit of a job file with an empty jobs list is refused and creates no state DB",
     # was exit 0, nothing printed, and a new st.db
     files(**{"jobs.yaml": "jobs: []\n"}), SUBMIT,
     ["jobs.yaml: jobs: the job file holds no jobs; add one"]),
]


@pytest.mark.parametrize("case, prepare, argv, message", FAULTS, ids=[c[0] for c in FAULTS])
def test_bad_yaml_input_found_wrong_is_now_refused(
        tmp_path, monkeypatch, capsys, case, prepare, argv, message):
    refused_in_lab(tmp_path, monkeypatch, capsys, prepare, argv, message)


# ---------------------------------------------------------------------- right already

DIRECTORY = {
    "cluster__a.yaml": CONFIG + "jobs: [{id: j1, project: A1, gpus: 1}]\n",
    "cluster__b.yaml": "gpu_types: [{name: h100, billing_weight: 2}]\n"
                       "nodes: [{name: 'box', gpu_type: h100, gpus: 4}]\n"
                       "org: {name: other, children: [{name: A1}]}\n"
                       "jobs: [{id: j1, project: B1, gpus: 1}]\n",
}

def ledger_lab(lab: Path) -> None:
    state_with_an_epoch(lab)
    (lab / "bad.yaml").write_text(GPU + "org: {name: lab, children: [{name: A1, shaer: 1}]}\n")


RIGHT = [
    ("a misspelt shaer key is refused by epoch with the closest key",
     files(**{"cfg.yaml": GPU + "org: {name: lab, children: [{name: A1, shaer: 1}, {name: B1}]}\n"}),
     EPOCH, ["cfg.yaml: org.children[0].shaer: unknown key 'shaer'; did you mean 'share'?"]),
    ("a misspelt key is refused by ledger report before the state DB is read",
     ledger_lab, ["ledger", "report", "--config", "bad.yaml", "--state", "st.db"],
     ["bad.yaml: org.children[0].shaer: unknown key 'shaer'"]),
    ("a share of .nan is refused at its key",
     files(**{"cfg.yaml": GPU + "org: {name: lab, children: [{name: A1}, {name: B1, share: .nan}]}\n"}),
     ["validate", "cfg.yaml"],
     ["cfg.yaml: org.children[1].share: must be a finite number, got nan"]),
    ("a share of 1.0e+400 (infinite to YAML) is refused at its key",
     files(**{"cfg.yaml": GPU + "org: {name: lab, children: [{name: A1}, {name: B1, share: 1.0e+400}]}\n"}),
     EPOCH, ["cfg.yaml: org.children[1].share: must be a finite number, got inf"]),
    ("a share written as a string is refused with how to write a number",
     files(**{"cfg.yaml": GPU + "org: {name: lab, children: [{name: A1, share: '50'}, {name: B1}]}\n"}),
     ["validate", "cfg.yaml"],
     ["cfg.yaml: org.children[0].share: expected a number, got a string ('50'); write a number"]),
    ("a project named NO (a YAML boolean) is told to quote it",
     files(**{"cfg.yaml": GPU + "org: {name: lab, children: [{name: NO}, {name: B1}]}\n"}),
     ["validate", "cfg.yaml"],
     ["cfg.yaml: org.children[0].name: expected a string, got a boolean (false); quote it"]),
    ("overlapping node ranges name the overlap and the first entry",
     files(**{"cfg.yaml": "gpu_types: [{name: h100}]\nnodes:\n"
              "  - {name: 'h100-[001-126]', gpu_type: h100, gpus: 8}\n"
              "  - {name: 'h100-[100-130]', gpu_type: h100, gpus: 8}\n" + ORG}),
     EPOCH, ["cfg.yaml: nodes[1].name: duplicate node names h100-100, h100-101, h100-102, "
             "h100-103, ... (27 in all) (also defined at cfg.yaml: nodes[0])"]),
    ("an unclosed node range is refused by epoch",
     files(**{"cfg.yaml": CONFIG.replace("name: box", "name: 'h100-[001-126'")}), EPOCH,
     ["cfg.yaml: nodes[0].name: unbalanced brackets in 'h100-[001-126'"]),
    ("conflicts between the files of a config directory are each named with both files",
     files(**DIRECTORY), ["epoch", "--config", "cluster", "--state", "st.db"],
     ["4 problems", "cluster/b.yaml: org: section 'org' is already defined in cluster/a.yaml",
      "cluster/b.yaml: gpu_types[0].name: duplicate gpu_type 'h100' (first defined at "
      "cluster/a.yaml: gpu_types[0])",
      "cluster/b.yaml: nodes[0].name: duplicate node name box (also defined at cluster/a.yaml",
      "cluster/b.yaml: jobs[0].id: duplicate job id 'j1' (also at cluster/a.yaml: jobs[0])"]),
    ("policy durations that are negative, in exponent form, past ten years or zero are refused",
     files(**{"cfg.yaml": CONFIG + "policy: {lookback: -5m, epoch: 1e9d, "
              "restart_overhead: 99999999d, checkpoint_interval: 0}\n"}),
     ["validate", "cfg.yaml"],
     ["4 problems", "cfg.yaml: policy.lookback: expected a duration, got a string ('-5m')",
      "cfg.yaml: policy.epoch: expected a duration, got a string ('1e9d')",
      "cfg.yaml: policy.restart_overhead: duration '99999999d' is out of range",
      "cfg.yaml: policy.checkpoint_interval: must be > 0, got 0"]),
    ("billing weights of zero, infinity or text are refused",
     files(**{"cfg.yaml": "gpu_types: [{name: h100, billing_weight: 0}, {name: b, "
              "billing_weight: .inf}, {name: c, billing_weight: '1.5'}]\n"
              "nodes: [{name: box, gpu_type: h100, gpus: 4}]\n" + ORG}),
     ["validate", "cfg.yaml"],
     ["cfg.yaml: gpu_types[0].billing_weight: must be > 0, got 0",
      "cfg.yaml: gpu_types[1].billing_weight: must be a finite number, got inf",
      "cfg.yaml: gpu_types[2].billing_weight: expected a number, got a string ('1.5')"]),
    ("a submitted job above the min_runtime cap and a repeated id are refused together",
     files(**{"jobs.yaml": "jobs:\n  - {id: j1, project: A1, gpus: 1, command: ['true']}\n"
              "  - {id: j1, project: B1, gpus: 1, min_runtime: 9h, command: ['true']}\n"}),
     SUBMIT, ["jobs.yaml: jobs[1].id: duplicate job id 'j1' (also at jobs.yaml: jobs[0])",
              "jobs.yaml: jobs[1].min_runtime: min_runtime 9h is above policy.min_runtime_cap 8h"]),
    ("a config of two YAML documents is refused at the second",
     files(**{"cfg.yaml": CONFIG + "---\norg: {name: x}\n"}), EPOCH,
     ["cfg.yaml: line 5, column 1: YAML syntax error", "found another document"]),
    ("an org tree nested past the YAML reader's depth is a located problem, not a crash",
     files(**{"cfg.yaml": GPU + org_chain(600)}), ["validate", "cfg.yaml"],
     ["cfg.yaml: line 3, column ", "exceeded maximum nesting depth"]),
    ("a UTF-16 config is refused as not UTF-8 by epoch",
     files(**{"cfg.yaml": CONFIG.encode("utf-16")}), EPOCH,
     ["cfg.yaml: is not UTF-8 text (byte 0: invalid start byte); save the file as UTF-8"]),
    ("simulation duration, epoch and seed out of range are refused together",
     files(**{"sc.yaml": JOBS_SCENARIO + "simulation: {duration: -5m, epoch: 0, seed: '7'}\n"}),
     SIMULATE, ["3 problems", "sc.yaml: simulation.duration: expected a duration",
                "sc.yaml: simulation.epoch: must be > 0, got 0",
                "sc.yaml: simulation.seed: expected an integer, got a string ('7')"]),
    ("a Philly folder without trace files is refused at workload.file",
     files(**{"sc.yaml": PHILLY_SCENARIO + "workload: {source: philly, file: pv}\n",
              "pv__simulation_throughputs.json": PHILLY_THROUGHPUTS}),
     SIMULATE, ["sc.yaml: workload.file: pv: no *.trace files"]),
    ("a Philly trace of a job type the throughputs lack is refused at workload.file",
     files(**{"sc.yaml": PHILLY_SCENARIO + "workload: {source: philly, file: pv, "
              "mapping: {team_map: {t1: t1}}}\n",
              "pv__t1.trace": PHILLY_TRACE.replace("Transformer", "Bogus"),
              "pv__simulation_throughputs.json": PHILLY_THROUGHPUTS}),
     ["validate", "sc.yaml"], ["sc.yaml: workload.file: pv: no throughput for job type(s) Bogus"]),
]



@pytest.mark.parametrize("case, prepare, argv, message", RIGHT, ids=[c[0] for c in RIGHT])
def test_bad_yaml_input_that_is_refused_right_stays_refused(
        tmp_path, monkeypatch, capsys, case, prepare, argv, message):
    refused_in_lab(tmp_path, monkeypatch, capsys, prepare, argv, message)


# ---------------------------------------------------------------------- inputs that are fine


def validate_json(tmp_path, monkeypatch, capsys, text: str) -> dict:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cfg.yaml").write_text(text)
    capsys.readouterr()
    assert main(["validate", "--json", "cfg.yaml"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_an_org_tree_16_levels_below_the_root_is_accepted(tmp_path, monkeypatch, capsys):
    org = {n["name"]: n for n in validate_json(tmp_path, monkeypatch, capsys,
                                                GPU + org_chain(16))["org"]}
    assert org["leaf"]["depth"] == 16 and org["leaf"]["leaf"]
    assert org["leaf"]["entitlement"]["h100"] == pytest.approx(0.5)


def test_a_program_with_an_empty_children_list_is_a_project(tmp_path, monkeypatch, capsys):
    org = {n["name"]: n for n in validate_json(
        tmp_path, monkeypatch, capsys,
        GPU + "org: {name: lab, children: [{name: P, share: 3, children: []}, {name: Q}]}\n")["org"]}
    assert org["P"]["leaf"] and org["P"]["entitlement"]["h100"] == pytest.approx(0.75)


def test_per_type_shares_need_not_sum_to_anything_they_are_normalized(
        tmp_path, monkeypatch, capsys):
    org = {n["name"]: n for n in validate_json(
        tmp_path, monkeypatch, capsys,
        "gpu_types: [{name: h100}, {name: b200}]\n"
        "nodes: [{name: 'h-[1-2]', gpu_type: h100, gpus: 8}, {name: b-1, gpu_type: b200, gpus: 8}]\n"
        "org: {name: lab, children: [{name: A, share: 35, share_by_type: {b200: 10}},"
        " {name: B, share: 40, share_by_type: {b200: 30}}]}\n")["org"]}
    assert org["A"]["entitlement"] == pytest.approx({"h100": 35 / 75, "b200": 0.25})
    assert org["B"]["entitlement"] == pytest.approx({"h100": 40 / 75, "b200": 0.75})


def test_durations_in_every_documented_form_are_accepted(tmp_path, monkeypatch, capsys):
    policy = validate_json(tmp_path, monkeypatch, capsys, CONFIG + "policy: {min_runtime_cap: 90m, "
                           "epoch: 1h30m, lookback: 1.5d, grace: 0, half_life: 3600}\n")["policy"]
    assert (policy["min_runtime_cap"], policy["epoch"], policy["lookback"], policy["grace"],
            policy["half_life"]) == ("1.5h", "1.5h", "36h", "0s", "1h")


def test_yaml_merge_keys_a_bom_and_crlf_line_ends_are_accepted(tmp_path, monkeypatch, capsys):
    text = ("\ufeffgpu_types: [{name: h100}]\r\nnodes:\r\n"
            "  - &d {name: 'a-[1-2]', gpu_type: h100, gpus: 8}\r\n"
            "  - {<<: *d, name: 'b-[1-2]'}\r\n  - {<<: *d, name: c-1, gpus: 4}\r\n" + ORG)
    nodes = validate_json(tmp_path, monkeypatch, capsys, text)["nodes"]
    assert nodes["h100"]["nodes"] == 5 and nodes["h100"]["gpus"] == 36


def test_a_cluster_of_exactly_100000_nodes_over_two_entries_is_accepted(
        tmp_path, monkeypatch, capsys):
    nodes = validate_json(tmp_path, monkeypatch, capsys, "gpu_types: [{name: h100}]\nnodes:\n"
                          "  - {name: 'r0-[00001-50000]', gpu_type: h100, gpus: 8}\n"
                          "  - {name: 'r1-[00001-50000]', gpu_type: h100, gpus: 8}\n" + ORG)["nodes"]
    assert nodes["h100"]["nodes"] == 100_000


def test_a_philly_team_listed_once_is_read(tmp_path, monkeypatch, capsys):
    files(**{"sc.yaml": PHILLY_SCENARIO + "workload: {source: philly, file: pv, teams: [t1]}\n",
             "pv__t1.trace": PHILLY_TRACE,
             "pv__simulation_throughputs.json": PHILLY_THROUGHPUTS})(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "sc.yaml"]) == 0
    assert "scenario: philly workload, 2 jobs" in capsys.readouterr().out
