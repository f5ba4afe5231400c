"""Keeping the garbage collector off the cockpit's loop: what lives as long as the app and
its run is frozen out of the collector's walks (the app on start, a run's screen once the
run's plumbing is up)."""

from __future__ import annotations

import gc


def freeze_long_lived(*, collect: bool = False) -> None:
    """Take every object alive now out of the cyclic garbage collector's walks.

    A full collection walks every tracked object: with Textual, numpy, pyarrow and a run's
    structures that held the event loop 70-200 ms, several times a minute (measured with
    ``benchmarks/tui_lag.py``). What exists once the app and a run have started lives as
    long as they do; frozen, it is no longer walked, and a full collection costs only what
    came later. Freezing is one list splice. ``collect`` first frees what earlier apps in
    this process left (tests run many): a full collection, so only before the app runs.
    """
    if collect:
        gc.unfreeze()
        gc.collect()
    gc.freeze()
