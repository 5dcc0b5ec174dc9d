"""Usage accounting: the in-memory fair-share ledger, owed/delivered metrics, the report, and the
SQLite state store (the one state file of a deployment). Math: models/ledger.md."""

from optalloc.ledger.memory import Ledger
from optalloc.ledger.owed import OwedDelivered
from optalloc.ledger.report import ReportRow, build_report, format_table, rows_to_json

__all__ = ["Ledger", "OwedDelivered", "ReportRow", "build_report", "format_table", "rows_to_json"]

from optalloc.ledger.store import SCHEMA_VERSION, StateStore  # noqa: E402

__all__ += ["SCHEMA_VERSION", "StateStore"]
