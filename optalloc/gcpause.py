"""Python's cyclic garbage collector paused for one bounded computation (an epoch).

An epoch on a large cluster makes millions of short-lived objects; nearly all are freed by
reference counting, yet their count alone triggers collections, full ones included, each
walking every live object (the 16,384-GPU bench epoch: three or four full passes, 0.4-0.5 s
under the profiler). Paused for the epoch and restored after, whatever it raises; cycles made
meanwhile are collected at the next collection after it. Process-wide while it runs, as any
gc setting is; nested or concurrent pauses leave the collector enabled once the first that
found it enabled ends."""

from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def gc_paused():
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
