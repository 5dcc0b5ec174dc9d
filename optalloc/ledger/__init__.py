"""Usage accounting: the in-memory fair-share ledger, owed/delivered metrics, the report, and the
SQLite state store (the one state file of a deployment). Math: models/ledger.md."""

from optalloc.ledger.memory import Ledger, running_intervals
from optalloc.ledger.owed import OwedDelivered
from optalloc.ledger.report import ReportRow, build_report, format_table, rows_to_json
from optalloc.ledger.store import SCHEMA_VERSION, StateStore

__all__ = [
    "Ledger",
    "OwedDelivered",
    "ReportRow",
    "SCHEMA_VERSION",
    "StateStore",
    "build_report",
    "format_table",
    "rows_to_json",
    "running_intervals",
]
