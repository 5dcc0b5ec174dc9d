"""Usage accounting: the in-memory fair-share ledger, owed/delivered metrics and the report.
Math: models/ledger.md. The state file that keeps the ledger's records is optalloc.state."""

from optalloc.ledger.memory import Ledger, running_intervals
from optalloc.ledger.owed import OwedDelivered
from optalloc.ledger.report import ReportRow, build_report, format_table, rows_to_json

__all__ = [
    "Ledger",
    "OwedDelivered",
    "ReportRow",
    "build_report",
    "format_table",
    "rows_to_json",
    "running_intervals",
]
