"""Shared pytest fixtures (generic: any area's tests may use them; add yours below).

- `fake_pynvml`: a stand-in for the nvidia-ml-py `pynvml` module that behaves like the real
  API (same function names and signatures, the real NVMLError classes and constants, NVMLError
  raised for unsupported queries, lost GPUs and calls before nvmlInit), installed in
  sys.modules so code that does `import pynvml` gets it.
- `wait_for(predicate, timeout)`: poll until a real process has done something.
- hypothesis profiles: `default` (fixed seed: reproducible runs) and `explore` (fresh random
  examples), chosen by $HYPOTHESIS_PROFILE.
- `slurm_cluster`: a real Slurm (munge + slurmctld + 4 slurmd) on localhost for tests marked
  `slurm`; skipped with the reason when not root or slurm-wlm/munge are missing.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import settings as hypothesis_settings

# Property tests draw their examples from a fixed seed by default, so a fresh clone's `make
# test` (and CI) passes or fails the same way every run; a failure prints its reproduce blob.
# `HYPOTHESIS_PROFILE=explore make test` (or `make test-explore`) draws fresh random examples,
# which is how new counterexamples are found during development.
hypothesis_settings.register_profile("default", derandomize=True, print_blob=True)
hypothesis_settings.register_profile("explore", derandomize=False, print_blob=True)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


# ---------------------------------------------------------------------- polling


def wait_until(predicate: Callable[[], object], timeout: float = 10.0, interval: float = 0.02):
    """Return predicate()'s first truthy value; fail the test if none comes within timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout}s: {predicate}")
        time.sleep(interval)


def make_lab(tmp_path: Path, monkeypatch, config: str) -> Path:
    """A private working directory `lab` (mode 0700) holding cfg.yaml = `config`, made the
    current directory: where the CLI tests run optalloc as a user would."""
    d = tmp_path / "lab"
    d.mkdir(mode=0o700)
    (d / "cfg.yaml").write_text(config)
    monkeypatch.chdir(d)
    return d


def kill_local_runs(db) -> None:
    """SIGKILL the process group of every run the local runner's table in state DB `db` has
    not recorded as ended (a test's teardown: never leave processes behind); nothing when the
    DB or the table does not exist."""
    import signal
    import sqlite3

    if not Path(db).exists():
        return
    conn = sqlite3.connect(db)
    try:
        pids = conn.execute("SELECT pid FROM runner_local_runs WHERE state != 'ended' "
                            "AND pid IS NOT NULL").fetchall()
    except sqlite3.OperationalError:  # no such table: the runner never ran
        pids = []
    finally:
        conn.close()
    for (pid,) in pids:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def wait_for():
    return wait_until


# ---------------------------------------------------------------------- fake NVML


@dataclass
class FakeGpu:
    """One GPU as the fake NVML reports it; flip fields to simulate faults."""

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    memory_total: int = 80 * 2**30
    memory_used: int = 0
    util_gpu: int = 0
    util_memory: int = 0
    ecc_uncorrected: int | None = 0  # None: ECC not supported (NVMLError NOT_SUPPORTED)
    retired_pages_pending: bool = False
    remapped_rows: tuple[int, int, int, int] | None = (0, 0, 0, 0)  # corr, unc, pending, failed
    lost: bool = False  # every query raises NVML_ERROR_GPU_IS_LOST
    processes: list[tuple[int, int]] = field(default_factory=list)  # (pid, used bytes)


def make_fake_pynvml(gpus: list[FakeGpu], init_error: int | None = None) -> types.ModuleType:
    """A module with pynvml's API over `gpus`. `init_error` makes nvmlInit raise that code."""
    import pynvml as real  # nvidia-ml-py is a dependency; only its constants/errors are used

    mod = types.ModuleType("pynvml")
    for name in dir(real):
        if name.startswith(("NVML_", "nvmlEventType")) or name.startswith("NVMLError"):
            setattr(mod, name, getattr(real, name))
    mod.gpus = gpus
    mod.initialized = False
    mod.pending_events = []  # (gpu index, xid) delivered by nvmlEventSetWait_v2
    err = real.NVMLError

    def need_init():
        if not mod.initialized:
            raise err(real.NVML_ERROR_UNINITIALIZED)

    def gpu(handle) -> FakeGpu:
        need_init()
        g = mod.gpus[handle.index]
        if g.lost:
            raise err(real.NVML_ERROR_GPU_IS_LOST)
        return g

    class Handle:
        def __init__(self, index):
            self.index = index

    def nvmlInit():
        if init_error is not None:
            raise err(init_error)
        mod.initialized = True

    def nvmlShutdown():
        need_init()
        mod.initialized = False

    def nvmlDeviceGetCount():
        need_init()
        return len(mod.gpus)

    handles: dict[int, Handle] = {}

    def nvmlDeviceGetHandleByIndex(i):
        need_init()
        if not 0 <= i < len(mod.gpus):
            raise err(real.NVML_ERROR_INVALID_ARGUMENT)
        return handles.setdefault(i, Handle(i))

    def nvmlDeviceGetName(h):
        return gpu(h).name

    def nvmlDeviceGetUUID(h):
        return gpu(h).uuid

    def nvmlDeviceGetMemoryInfo(h):
        g = gpu(h)
        return types.SimpleNamespace(total=g.memory_total, used=g.memory_used,
                                     free=g.memory_total - g.memory_used)

    def nvmlDeviceGetUtilizationRates(h):
        g = gpu(h)
        return types.SimpleNamespace(gpu=g.util_gpu, memory=g.util_memory)

    def nvmlDeviceGetTotalEccErrors(h, error_type, counter_type):
        g = gpu(h)
        if g.ecc_uncorrected is None:
            raise err(real.NVML_ERROR_NOT_SUPPORTED)
        assert error_type == real.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
        assert counter_type == real.NVML_VOLATILE_ECC
        return g.ecc_uncorrected

    def nvmlDeviceGetRetiredPagesPendingStatus(h):
        return int(gpu(h).retired_pages_pending)

    def nvmlDeviceGetRemappedRows(h):
        g = gpu(h)
        if g.remapped_rows is None:
            raise err(real.NVML_ERROR_NOT_SUPPORTED)
        return g.remapped_rows

    def nvmlDeviceGetComputeRunningProcesses(h):
        return [types.SimpleNamespace(pid=p, usedGpuMemory=m, gpuInstanceId=0xFFFFFFFF,
                                      computeInstanceId=0xFFFFFFFF)
                for p, m in gpu(h).processes]

    def nvmlEventSetCreate():
        need_init()
        return object()

    def nvmlDeviceRegisterEvents(h, event_types, event_set):
        gpu(h)

    def nvmlEventSetWait_v2(event_set, timeout_ms):
        need_init()
        if not mod.pending_events:
            raise err(real.NVML_ERROR_TIMEOUT)
        index, xid = mod.pending_events.pop(0)
        return types.SimpleNamespace(device=handles.setdefault(index, Handle(index)),
                                     eventType=real.nvmlEventTypeXidCriticalError,
                                     eventData=xid)

    def nvmlEventSetFree(event_set):
        pass

    for fn in list(locals().values()):
        if callable(fn) and getattr(fn, "__name__", "").startswith("nvml"):
            setattr(mod, fn.__name__, fn)
    mod.NVMLError = err
    return mod


@pytest.fixture
def fake_pynvml(monkeypatch):
    """Factory: fake_pynvml([FakeGpu(...), ...], init_error=None) installs and returns a fake
    `pynvml` module (removed again after the test)."""

    def install(gpus: list[FakeGpu], init_error: int | None = None) -> types.ModuleType:
        mod = make_fake_pynvml(gpus, init_error)
        monkeypatch.setitem(sys.modules, "pynvml", mod)
        return mod

    return install


@pytest.fixture
def no_pynvml(monkeypatch):
    """Make `import pynvml` fail as on a machine without nvidia-ml-py."""
    monkeypatch.setitem(sys.modules, "pynvml", None)


# ---------------------------------------------------------------------- real Slurm


@pytest.fixture(scope="session")
def slurm_cluster():
    """A real Slurm (4 nodes x 8 fake h100 GPUs, partition `gpu`) for the session; see
    tests/slurm_cluster.py. Skipped, with the reason, when not root or Slurm is missing."""
    from tests.slurm_cluster import SlurmCluster, missing_requirements

    why = missing_requirements()
    if why:
        pytest.skip(why)
    # munged needs o+x on every directory above its socket; pytest's tmp dirs are 0700
    root = Path(tempfile.mkdtemp(prefix="optalloc-slurm-"))
    root.chmod(0o711)
    cluster = SlurmCluster(root)
    try:
        cluster.start()
    except RuntimeError as err:
        cluster.stop()
        pytest.fail(f"could not start the test Slurm cluster: {err}")
    yield cluster
    cluster.stop()
    shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------------- the demo state


DEMO_CONFIG = Path(__file__).resolve().parents[1] / "scenarios" / "demo.yaml"
DEMO_TIMES = ("2026-11-29T12:00:00Z", "2026-11-29T13:00:00Z")  # as `make demo` runs them


@dataclass(frozen=True)
class DemoState:
    config: Path
    state: Path
    plans: tuple[Path, ...]  # the plan file of each epoch, in order
    now: str  # the last epoch's time


@pytest.fixture(scope="session")
def demo_state(tmp_path_factory) -> DemoState:
    """The state `make demo` builds (two epochs an hour apart on scenarios/demo.yaml, no-op
    runner), built once per session. Tests must not write to it: copy it first."""
    from optalloc.cli import main

    root = tmp_path_factory.mktemp("demo")
    state = root / "state.db"
    plans = []
    for i, now in enumerate(DEMO_TIMES):
        plan = root / f"plan-{i + 1}.json"
        assert main(["epoch", "--config", str(DEMO_CONFIG), "--state", str(state), "--now", now,
                     "--out", str(plan)]) == 0
        plans.append(plan)
    return DemoState(DEMO_CONFIG, state, tuple(plans), DEMO_TIMES[-1])


# ---------------------------------------------------------------------- headless Chromium


@dataclass(frozen=True)
class Browser:
    """Debian's chromium, headless: `dom(url)` is the page after its scripts ran,
    `screenshot(url, png)` writes an image of it."""

    path: str
    profile: Path

    def _run(self, *args: str, timeout: float = 90.0):
        import subprocess

        cmd = [self.path, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--no-first-run", "--disable-dev-shm-usage", f"--user-data-dir={self.profile}",
               "--virtual-time-budget=10000", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)

    def dom(self, url: str) -> str:
        proc = self._run("--dump-dom", url)
        if proc.returncode != 0 or "<html" not in proc.stdout:
            pytest.fail(f"chromium could not load {url}: exit {proc.returncode}\n"
                        f"{proc.stderr[-2000:]}")
        return proc.stdout

    def screenshot(self, url: str, png: Path, width: int = 1400, height: int = 1000) -> Path:
        proc = self._run(f"--screenshot={png}", f"--window-size={width},{height}", url)
        if proc.returncode != 0 or not png.exists():
            pytest.fail(f"chromium could not screenshot {url}: {proc.stderr[-2000:]}")
        return png


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="session")
def browser(tmp_path_factory) -> Browser:
    """Headless Chromium for tests marked `browser`. Found on PATH, else installed when root
    (scripts/ci-browser-setup.sh: apt-get install chromium); skipped, with the reason, only
    when neither works."""
    import os
    import subprocess

    path = find_chromium()
    why = "chromium is not installed"
    if path is None:
        setup = Path(__file__).resolve().parents[1] / "scripts" / "ci-browser-setup.sh"
        if os.geteuid() != 0 or not shutil.which("apt-get"):
            pytest.skip(f"{why} and this is not root with apt-get: run `apt-get install "
                        "chromium` (Debian) to run the browser tests")
        proc = subprocess.run([str(setup)], capture_output=True, text=True, timeout=1200)
        path = find_chromium()
        if path is None:
            pytest.skip(f"{why}; installing it failed (exit {proc.returncode}): "
                        f"{(proc.stderr or proc.stdout)[-500:]}")
    b = Browser(path, tmp_path_factory.mktemp("chromium-profile"))
    probe = tmp_path_factory.mktemp("chromium-probe") / "probe.html"
    probe.write_text("<html><body><p id=p></p><script>document.getElementById('p')"
                     ".textContent = 'scripts run'</script></body></html>")
    proc = b._run("--dump-dom", probe.as_uri())
    if "scripts run" not in proc.stdout:
        pytest.skip(f"chromium at {path} cannot run headless here (exit {proc.returncode}): "
                    f"{proc.stderr[-500:]}")
    return b
