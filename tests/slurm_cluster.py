"""A real, throwaway Slurm on localhost for integration tests (engine of the `slurm_cluster`
fixture in conftest.py; also runnable by hand: `python tests/slurm_cluster.py DIR`).

munge (own key, socket dir mode 0711) + slurmctld (`-c`: clean state) + N slurmd started as
virtual nodes (`slurmd -N nodeK`) with G fake GPUs each (gres files are symlinks to /dev/null:
Slurm needs character devices) on free ports, everything under one directory. Needs root and
the Debian packages slurm-wlm and munge (scripts/ci-slurm-setup.sh). Facts it relies on:
`cred_expire=10` shortens the requeue delay from ~120 s to ~11 s; slurmd ignores SIGTERM until
it has registered, so teardown falls back to SIGKILL; without slurmdbd there is no accounting
(no sacct, no AccountingStorageTRES).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REQUIRED = ("slurmctld", "slurmd", "munged", "mungekey", "sbatch", "squeue", "scontrol",
            "scancel", "sinfo")


def missing_requirements() -> str | None:
    """Why a real Slurm cannot be started here, or None when it can."""
    if os.geteuid() != 0:
        return "needs root (slurmd runs jobs as any user); run as root or in CI"
    missing = [c for c in REQUIRED if shutil.which(c) is None
               and not Path("/usr/sbin", c).exists()]
    if missing:
        return (f"Slurm/munge not installed (missing {', '.join(missing)}); "
                "run scripts/ci-slurm-setup.sh as root")
    return None


def _which(cmd: str) -> str:
    return shutil.which(cmd) or str(Path("/usr/sbin", cmd))


def free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


@dataclass
class SlurmCluster:
    root: Path
    nodes: int = 4
    gpus: int = 8
    gpu_type: str = "h100"
    partition: str = "gpu"
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def node_names(self) -> list[str]:
        return [f"node{i}" for i in range(1, self.nodes + 1)]

    def env(self) -> dict[str, str]:
        """Environment for client commands (sbatch, squeue...) against this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    # ------------------------------------------------------------------ config
    def _write_config(self) -> None:
        r = self.root
        for d in ("etc", "state", "spool", "log", "run", "dev", "munge", "jobs"):
            (r / d).mkdir(parents=True, exist_ok=True)
        os.chmod(r / "munge", 0o711)  # munged refuses a socket dir others cannot traverse
        for i in range(self.gpus):
            link = r / "dev" / f"gpu{i}"
            if not link.is_symlink():
                link.symlink_to("/dev/null")  # must stat as a character device
        ctld, slurmd, *node_ports = free_ports(2 + self.nodes)
        lines = f"""\
ClusterName=optalloctest
SlurmctldHost=localhost
SlurmctldPort={ctld}
SlurmdPort={slurmd}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={r}/munge/munge.sock,cred_expire=10
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool/%n
SlurmctldPidFile={r}/run/slurmctld.pid
SlurmdPidFile={r}/run/slurmd-%n.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
KillWait=5
MinJobAge=600
"""
        for name, port in zip(self.node_names, node_ports):
            lines += (f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} "
                      f"CPUs=16 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=4000 "
                      f"Gres=gpu:{self.gpu_type}:{self.gpus} State=UNKNOWN\n")
        lines += (f"PartitionName={self.partition} Nodes=node[1-{self.nodes}] Default=YES "
                  "MaxTime=INFINITE State=UP\n")
        self.conf.write_text(lines)
        (r / "etc" / "gres.conf").write_text(
            "AutoDetect=off\n"
            f"NodeName=node[1-{self.nodes}] Name=gpu Type={self.gpu_type} "
            f"File={r}/dev/gpu[0-{self.gpus - 1}]\n")

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 60.0) -> "SlurmCluster":
        why = missing_requirements()
        if why:
            raise RuntimeError(why)
        self._write_config()
        r = self.root
        key = r / "munge" / "munge.key"
        if not key.exists():
            subprocess.run([_which("mungekey"), "--create", f"--keyfile={key}"], check=True,
                           capture_output=True, timeout=30)
        self._spawn("munged", [_which("munged"), "--foreground", f"--key-file={key}",
                               f"--socket={r}/munge/munge.sock",
                               f"--pid-file={r}/munge/munged.pid",
                               f"--log-file={r}/munge/munged.log",
                               f"--seed-file={r}/munge/munged.seed"])
        self._wait(lambda: (r / "munge" / "munge.sock").exists(), 10, "munged socket")
        self._spawn("slurmctld", [_which("slurmctld"), "-D", "-c", "-f", str(self.conf)])
        for n in self.node_names:
            self._spawn(f"slurmd-{n}", [_which("slurmd"), "-D", "-N", n, "-f", str(self.conf)])
        self._wait(self._all_idle, timeout, "all nodes idle")
        return self

    def _spawn(self, name: str, argv: list[str]) -> None:
        out = open(self.root / "log" / f"{name}.out", "ab")
        self.procs[name] = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, env=self.env())
        out.close()

    def _all_idle(self) -> bool:
        ctld = self.procs.get("slurmctld")
        if ctld is None or ctld.poll() is not None:
            raise RuntimeError("slurmctld exited:\n" + self.log_tail("slurmctld.log"))
        try:
            out = subprocess.run(
                ["sinfo", "-h", "-N", "-p", self.partition, "-o", "%T"], env=self.env(),
                capture_output=True, text=True, timeout=10).stdout.split()
        except subprocess.TimeoutExpired:
            return False
        return out.count("idle") == self.nodes

    def _wait(self, pred, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > deadline:
                raise RuntimeError(f"Slurm test cluster: timed out waiting for {what}\n"
                                   + self.log_tail("slurmctld.log"))
            time.sleep(0.1)

    def log_tail(self, name: str, n: int = 30) -> str:
        p = self.root / "log" / name
        return "\n".join(p.read_text(errors="replace").splitlines()[-n:]) if p.exists() else ""

    def stop(self) -> None:
        """Cancel every job, stop the daemons (SIGTERM, then SIGKILL for the stubborn)."""
        ctld = self.procs.get("slurmctld")
        if ctld is not None and ctld.poll() is None:
            for argv in (["scancel", "--full", "-s", "KILL", "-u", "root"],
                         ["scancel", "-u", "root"]):
                subprocess.run(argv, env=self.env(), capture_output=True, timeout=15)
        procs = list(self.procs.values())
        for p in procs:
            if p.poll() is None:
                _signal_group(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.1)
        for p in procs:
            if p.poll() is None:
                _signal_group(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
        self.procs.clear()


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


if __name__ == "__main__":  # manual exploration: start, print SLURM_CONF, wait for Ctrl-C
    c = SlurmCluster(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/optalloc-slurm")).start()
    print(f"export SLURM_CONF={c.conf}", flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        c.stop()
