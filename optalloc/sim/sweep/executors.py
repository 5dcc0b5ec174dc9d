"""Where a sweep's runs execute: in this process one after the other (`--jobs 1`), in local
worker processes (`concurrent.futures.ProcessPoolExecutor`, the default, one per core), or on
a Dask distributed cluster (`--engine dask`: an existing scheduler at `--address`, else a
`distributed.LocalCluster` of `--jobs` worker processes on this machine).

Every executor has the same shape: a context manager (entering it starts or reaches the
workers, so an unreachable scheduler is reported before anything is written) whose `run`
yields (task, record) as runs finish, in completion order. A task's scenario goes to the
workers with it (Dask: scattered once per seed), so workers need optalloc installed, not the
scenario's files. A run that raises inside `run_cell` comes back as a failed record; a worker
that dies, or a task the engine cannot deliver, becomes a failed record here.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler
from types import MappingProxyType
from typing import Any, Iterator, Mapping, Sequence

import optalloc
from optalloc.errors import OptallocError
from optalloc.sim.sweep.cell import failure, run_cell
from optalloc.units import MAX_THREADS

ENGINES = ("local", "dask")


@dataclass(frozen=True)
class Task:
    key: str
    seed: int
    overrides: tuple[str, ...]
    policy: str
    check: bool = False


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def make_executor(engine: str = "local", jobs: int | None = None, address: str | None = None):
    """The executor for the CLI's `--engine`, `--jobs`, `--address`; OptallocError when they do
    not fit together."""
    if engine not in ENGINES:
        raise OptallocError(f"--engine: unknown engine {engine!r}; choose from {', '.join(ENGINES)}")
    if jobs is not None and jobs < 1:
        raise OptallocError(f"--jobs must be >= 1, got {jobs}")
    if jobs is not None and jobs > MAX_THREADS:
        raise OptallocError(f"--jobs must be <= {MAX_THREADS} (worker processes), got "
                            f"{jobs if len(str(jobs)) <= 30 else str(jobs)[:27] + '...'}")
    if engine == "local":
        if address:
            raise OptallocError("--address needs --engine dask (the local engine starts its own processes)")
        n = jobs or default_jobs()
        return SerialExecutor() if n == 1 else ProcessExecutor(n)
    return DaskExecutor(address, jobs)


# --------------------------------------------------------------------------- in this process


class SerialExecutor:
    name = "sequential"
    workers = 1

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def run(self, tasks: Sequence[Task], scenarios: Mapping[int, Any]) -> Iterator[tuple[Task, dict]]:
        for t in tasks:
            yield t, run_cell(scenarios[t.seed], t.overrides, t.policy, t.check)


# --------------------------------------------------------------------------- local processes


def _mappingproxy(d: dict) -> MappingProxyType:
    return MappingProxyType(d)


def _reduce_mappingproxy(m: MappingProxyType):
    return _mappingproxy, (dict(m),)


def _worker_init() -> None:
    # Ctrl-C is the driver's to handle: it stops the workers itself (below), and a worker that
    # took the KeyboardInterrupt would only turn it into a failed run and take the next one
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Terminate the pool's processes now (Python 3.14 has it as a method)."""
    stop = getattr(pool, "terminate_workers", None)
    if stop is not None:
        stop()
        return
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        if proc.is_alive():
            proc.terminate()


class ProcessExecutor:
    """`jobs` worker processes, started with `spawn` (no fork of a process that holds threads:
    tqdm's monitor, a solver's pool). Leaving on an exception (Ctrl-C) terminates the workers
    at once instead of waiting for their runs: the finished runs are already stored."""

    name = "local processes"

    def __init__(self, jobs: int):
        self.workers = int(jobs)
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self):
        # the frozen records hold read-only mappings (types.frozen_map), which plain pickle
        # refuses; multiprocessing's own pickler learns to send them as dicts
        ForkingPickler.register(MappingProxyType, _reduce_mappingproxy)
        return self

    def __exit__(self, exc_type=None, *exc) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if exc_type is not None:
            _stop_workers(pool)
        pool.shutdown(wait=True, cancel_futures=True)

    def run(self, tasks: Sequence[Task], scenarios: Mapping[int, Any]) -> Iterator[tuple[Task, dict]]:
        """A worker that dies (killed for memory, a crash in native code) breaks the whole pool
        and every run it still held; those runs get one more try in a fresh pool, and fail
        with the pool's error if it breaks again."""
        pending = list(tasks)
        for attempt in range(2):
            if not pending:
                return
            if self._pool is None:  # no more processes than runs
                self._pool = ProcessPoolExecutor(
                    max_workers=min(self.workers, len(pending)), mp_context=multiprocessing.get_context("spawn"),
                    initializer=_worker_init,
                )
            broken: list[Task] = []
            futures = {
                self._pool.submit(run_cell, scenarios[t.seed], t.overrides, t.policy, t.check): t for t in pending
            }
            try:
                for fut in as_completed(futures):
                    task = futures[fut]
                    try:
                        record = fut.result()
                    except BrokenProcessPool as err:
                        if attempt == 0:
                            broken.append(task)
                            continue
                        record = failure(err)
                    except Exception as err:  # the task could not be sent or its result read
                        record = failure(err)
                    yield task, record
            finally:
                for fut in futures:
                    fut.cancel()
            if broken:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None
            pending = broken


# --------------------------------------------------------------------------- Dask distributed


def _worker_version() -> str:
    return optalloc.__version__


class DaskExecutor:
    """Runs on a Dask distributed cluster: `address` (tcp://host:8786) of a running scheduler,
    or None for a LocalCluster of `jobs` single-threaded worker processes on 127.0.0.1."""

    name = "dask"

    def __init__(self, address: str | None = None, jobs: int | None = None, *, connect_timeout_s: float = 30.0):
        self.address = address
        self.jobs = jobs
        self.connect_timeout_s = connect_timeout_s
        self.workers = 0
        self._client = None
        self._cluster = None

    def __enter__(self):
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise OptallocError(
                "--engine dask needs Dask distributed: pip install 'optalloc[cluster]'"
            ) from None
        try:
            if self.address:
                self._client = Client(self.address, timeout=self.connect_timeout_s)
                self._client.wait_for_workers(1, timeout=self.connect_timeout_s)
            else:
                self._cluster = LocalCluster(
                    n_workers=self.jobs or default_jobs(), threads_per_worker=1, processes=True,
                    host="127.0.0.1", dashboard_address=None,
                )
                self._client = Client(self._cluster)
        except (OSError, TimeoutError, ValueError) as err:  # ValueError: a malformed address
            self.__exit__()
            where = f"the Dask scheduler at {self.address}" if self.address else "a local Dask cluster"
            raise OptallocError(
                f"--engine dask: cannot reach {where} with a worker ({err}); start one with "
                "`dask scheduler` and `dask worker tcp://HOST:8786` in an environment with "
                "optalloc installed, then pass --address tcp://HOST:8786"
            ) from None
        self._check_workers()
        return self

    def _check_workers(self) -> None:
        try:
            versions = self._client.run(_worker_version)
        except Exception as err:
            self.__exit__()
            raise OptallocError(
                f"--engine dask: the workers cannot run optalloc ({type(err).__name__}: {err}); "
                f"install optalloc {optalloc.__version__} in the workers' environment"
            ) from None
        wrong = sorted(w for w, v in versions.items() if v != optalloc.__version__)
        if wrong:
            self.__exit__()
            raise OptallocError(
                f"--engine dask: worker(s) {', '.join(wrong)} run another optalloc version "
                f"(this one is {optalloc.__version__}); install the same version on every worker"
            )
        self.workers = len(versions)

    def __exit__(self, *exc) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    def run(self, tasks: Sequence[Task], scenarios: Mapping[int, Any]) -> Iterator[tuple[Task, dict]]:
        from distributed import as_completed as dask_completed

        client = self._client
        assert client is not None, "use the executor in a with-block"
        seeds = sorted({t.seed for t in tasks})
        refs = {s: client.scatter(scenarios[s], hash=False) for s in seeds}
        futures = {
            client.submit(run_cell, refs[t.seed], t.overrides, t.policy, t.check,
                          key=f"optalloc-sweep-{t.policy}-{t.key}", pure=False): t
            for t in tasks
        }
        try:
            for fut in dask_completed(futures):
                task = futures[fut]
                try:
                    yield task, fut.result()
                except Exception as err:  # lost workers past the retry limit, a broken task
                    yield task, failure(err)
        finally:
            client.cancel(list(futures))
            client.cancel(list(refs.values()))
