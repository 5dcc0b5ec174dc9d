"""Row functions for the isolation tests (imported by name in the row's own process)."""

from __future__ import annotations

import time


def fine(progress=None, value=1):
    progress({"started": True})
    return {"status": "optimal", "value": value}


def hog(progress=None, mb=400):
    progress({"allocating_mb": mb})
    block = bytearray(mb * 2**20)
    for i in range(0, len(block), 4096):  # touch every page so it is resident
        block[i] = 1
    time.sleep(30)
    return {"status": "optimal"}


def sleeper(progress=None, seconds=30.0):
    progress({"step": 1})
    time.sleep(seconds)
    return {"status": "optimal"}


def boom(progress=None):
    raise ValueError("a bad row")
