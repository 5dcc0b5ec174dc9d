"""The state DB, one layer for everything that keeps tables in it: the state store (queue,
epochs, events, intervals and samples: `store`, `records`), the runners' tables
(`local_tables`, `slurm_tables`), and the plumbing they share (`db`: opening with the state
file's checks, write transactions, locked retries, SQLite errors as StateError; `check`: what
is known about a state path without writing a byte)."""

from optalloc.state.check import SCHEMA_VERSION, check_state_file
from optalloc.state.records import STORED_PLANS
from optalloc.state.store import StateStore

__all__ = ["SCHEMA_VERSION", "STORED_PLANS", "StateStore", "check_state_file"]
