"""YAML config -> typed, immutable objects, with every problem located (file, key path, fix).

    config = load_config("scenarios/demo.yaml")            # a file or a directory of *.yaml
    config, extras = load_document("scenarios/demo.yaml")  # + raw `workload` / `simulation`
    config, extras = parse_config({"gpu_types": [...], ...}, source="test")
    jobs = load_jobs("data/sample_jobs.yaml", config)      # a job file for `optalloc submit`

Problems are all collected and raised together as ConfigError(problems), each reading
``FILE: key.path[3].sub: what is wrong; how to fix``.
"""

from optalloc.config.jobs import JobContext, parse_job
from optalloc.config.load import (
    EXTRA_SECTIONS,
    SECTIONS,
    load_config,
    load_document,
    load_jobs,
    parse_config,
    parse_jobs,
)
from optalloc.config.nodes import expand_node_names
from optalloc.config.policy import SOLVER_BACKENDS, USAGE_MODES
from optalloc.config.problems import Loc, Problems
from optalloc.errors import ConfigError

__all__ = [
    "ConfigError",
    "EXTRA_SECTIONS",
    "JobContext",
    "Loc",
    "Problems",
    "SECTIONS",
    "SOLVER_BACKENDS",
    "USAGE_MODES",
    "expand_node_names",
    "load_config",
    "load_document",
    "load_jobs",
    "parse_config",
    "parse_job",
    "parse_jobs",
]
