"""Runners: where a Plan meets the machines (protocol in `optalloc.runners.base`).

`make_runner(name, **opts)` builds one by name:

- `noop`: starts nothing (dry runs, demos).
- `local`: this machine, jobs as child processes (`optalloc.runners.local`). Options:
  `config` (its nodes and policy), `state_path` (the state DB), `directory` (job logs;
  default `<state dir>/runs`), `node` (config node name of this machine; default: the node named
  like this host, else the config's only node, else one built from NVML), `notice_signal`.
- `slurm`: a Slurm cluster through its CLI (`optalloc.runners.slurm`). Options: `config`,
  `state_path`, `partition` (default: the cluster's default), `slurm_conf` (SLURM_CONF for
  every command), `timeout_s`.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

from optalloc.errors import OptallocError
from optalloc.hostlist import compress_names
from optalloc.types import Config, Node

log = logging.getLogger(__name__)

RUNNERS = ("noop", "local", "slurm")


def make_runner(name: str, **opts: Any):
    """A runner by name with its options (see the module docstring). Unknown names and
    unusable options raise OptallocError with what to do."""
    key = (name or "").strip().lower()
    if key == "noop":
        from optalloc.runners.noop import NoopRunner

        return NoopRunner()
    if key == "local":
        return _make_local(**opts)
    if key == "slurm":
        return _make_slurm(**opts)
    raise OptallocError(f"unknown runner {name!r}; choose one of: {', '.join(RUNNERS)}")


def _make_local(*, state_path, config: Config | None = None, directory=None, node: str | None = None,
                notice_signal: str | int = "TERM", inventory=None, **kw: Any):
    from optalloc.runners.local import LocalRunner
    from optalloc.runners.nvml import GpuInventory

    inv = inventory if inventory is not None else GpuInventory.open()
    this = resolve_local_node(config, inv, node)
    try:
        return LocalRunner(
            state_path, this, run_dir=directory, inventory=inv,
            policy=None if config is None else config.policy, notice_signal=notice_signal,
            job_env=None if config is None else config.job_env, **kw)
    except ValueError as err:
        raise OptallocError(f"local runner: {err}") from None


def resolve_local_node(config: Config | None, inventory, name: str | None = None) -> Node:
    """Which config node this machine is: `name` if given, else the node named like this host
    (full or short hostname), else the config's only node, else one built from NVML."""
    nodes = {n.name: n for n in (config.nodes if config else ())}
    if name is not None:
        if name not in nodes:
            raise OptallocError(
                f"local runner: node {name!r} is not in the config (nodes: "
                f"{compress_names(sorted(nodes)) or 'none'}); add it under `nodes:` or pick "
                "another")
        return nodes[name]
    host = socket.gethostname()
    for candidate in (host, host.split(".")[0]):
        if candidate in nodes:
            return _check_against_nvml(nodes[candidate], inventory)
    if len(nodes) == 1:
        return _check_against_nvml(next(iter(nodes.values())), inventory)
    gpus = inventory.gpus() if inventory is not None and inventory.available else ()
    if gpus:
        return Node(host.split(".")[0], gpus[0].gpu_type, len(gpus))
    raise OptallocError(
        f"local runner: cannot tell which config node this machine ({host}) is among "
        f"{compress_names(sorted(nodes)) or 'no nodes'}; name it with --node or give the config a "
        "node named like this host")


def _check_against_nvml(node: Node, inventory) -> Node:
    gpus = inventory.gpus() if inventory is not None and inventory.available else ()
    if gpus and len(gpus) != node.gpus:
        log.warning("node %s: the config declares %d GPUs but NVML sees %d; placing on the "
                    "config's GPUs", node.name, node.gpus, len(gpus))
    return node


def _make_slurm(*, state_path=None, config: Config | None = None, **kw: Any):
    from optalloc.runners.slurm import SlurmRunner

    kw.pop("directory", None)  # logs live where Slurm puts them
    return SlurmRunner(state_path=state_path, config=config, **kw)
