"""Running a sweep plan: skip the runs already finished in OUT, send the others to the
executor, store each record atomically as it comes back (with a progress bar and ETA across
runs), then write the tables, the summary and the plots from every record of the plan."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

from optalloc.sim.sweep.cell import OK
from optalloc.sim.sweep.executors import Task, make_executor
from optalloc.sim.sweep.plan import Run, SweepPlan
from optalloc.sim.sweep.plots import write_plots
from optalloc.sim.sweep.report import markdown_summary
from optalloc.sim.sweep.store import RunStore, atomic_write, write_json
from optalloc.sim.sweep.table import results_table, summary_table


@dataclass
class SweepResult:
    plan: SweepPlan
    out: Path
    table: pd.DataFrame  # one row per run (results.parquet)
    summary: pd.DataFrame  # one row per cell x policy x metric (summary.parquet)
    ran: int  # runs executed by this call
    skipped: int  # runs found finished in OUT
    wall_s: float
    paths: dict[str, Path] = field(default_factory=dict)

    @property
    def failed(self) -> pd.DataFrame:
        return self.table[self.table["status"] != OK]


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_sweep(
    plan: SweepPlan,
    scenarios: Mapping[int, Any],
    out: str | Path,
    executor=None,
    *,
    progress: bool = True,
    log: Callable[[str], None] = _stderr,
) -> SweepResult:
    """Run every run of `plan` not yet finished in `out` on `executor` (default: local
    processes, one per core) and write the results. `scenarios`: seed -> scenario, as given to
    `plan_sweep`."""
    out = Path(out)
    executor = executor if executor is not None else make_executor()
    store = RunStore(out)
    t0 = time.perf_counter()
    by_key: dict[str, Run] = {}
    with executor:  # workers started or reached before anything is written
        store.prepare()
        write_json(out / "sweep.json", {**plan.describe(), "engine": executor.name})
        records: dict[str, dict] = {}
        todo: list[Run] = []
        for run in plan.runs:
            if run.key in by_key:
                continue  # two cells with the same configuration share one run
            by_key[run.key] = run
            rec = store.finished(run.key)
            if rec is not None:
                records[run.key] = rec
            else:
                todo.append(run)
        skipped = len(by_key) - len(todo)
        log(
            f"sweep {plan.scenario}: {plan.size()}; {skipped} finished earlier in {out}, "
            f"{len(todo)} to run ({executor.name}, {_n(executor.workers, 'worker')})"
        )
        tasks = [Task(r.key, r.seed, r.cell.overrides, r.policy, plan.check) for r in todo]
        bar = _bar(len(tasks)) if progress and tasks else None
        n_failed = 0
        try:
            for task, rec in executor.run(tasks, scenarios):
                run = by_key[task.key]
                doc = {
                    "key": task.key, "cell": run.cell.index,
                    "values": dict(zip([a.key for a in plan.axes], run.cell.values)),
                    "overrides": list(run.cell.overrides), "policy": run.policy, "seed": run.seed, **rec,
                }
                store.save(doc)
                records[task.key] = doc
                if rec["status"] != OK:
                    n_failed += 1
                    log(f"run failed: cell {run.cell.index} [{run.cell.label(plan.axes)}], {run.policy}, "
                        f"seed {run.seed}: {rec['error']}")
                if bar is not None:
                    bar.update(1)
                    if n_failed:
                        bar.set_postfix(failed=n_failed)
        finally:
            if bar is not None:
                bar.close()
    table = results_table(plan, records)
    summary = summary_table(table, plan)
    paths = write_outputs(plan, table, summary, out)
    return SweepResult(plan, out, table, summary, ran=len(tasks), skipped=skipped,
                       wall_s=time.perf_counter() - t0, paths=paths)


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _bar(total: int):
    from tqdm import tqdm

    return tqdm(total=total, desc="sweep", unit="run", mininterval=1.0, file=sys.stderr,
                bar_format="{desc}: {percentage:3.0f}%|{bar}| {n}/{total} runs [{elapsed}<{remaining}]{postfix}")


def write_outputs(plan: SweepPlan, table: pd.DataFrame, summary: pd.DataFrame, out: Path) -> dict[str, Path]:
    paths = {
        "results.parquet": atomic_write(out / "results.parquet", lambda p: table.to_parquet(p, index=False)),
        "results.csv": atomic_write(out / "results.csv", lambda p: table.to_csv(p, index=False)),
        "summary.parquet": atomic_write(out / "summary.parquet", lambda p: summary.to_parquet(p, index=False)),
        "summary.csv": atomic_write(out / "summary.csv", lambda p: summary.to_csv(p, index=False)),
    }
    plots = write_plots(plan, summary, out / "plots")
    for p in plots:
        paths[f"plots/{p.name}"] = p
    md = markdown_summary(plan, summary, table, [f"plots/{p.name}" for p in plots])
    paths["summary.md"] = atomic_write(out / "summary.md", lambda p: p.write_text(md))
    return paths
