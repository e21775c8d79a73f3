"""Garbage collection without long pauses in a process that holds a large model.

CPython's full (generation 2) collection walks every tracked object: with 50,000 Workloads in
the informer caches and the engine it holds the event loop for 150 ms and more, and every
webhook request arriving meanwhile waits (bench/engine.py measured a 143 ms pause in the
scheduler's loop). What is alive once the caches are synced, and what survives each minute
after, is long-lived: :func:`gc.freeze` moves it to the permanent generation, which automatic
collections skip, so they walk only what was made since. Frozen objects are still freed by
reference counting, as nearly all of ours are; cyclic garbage among them would wait, so once in
a while (``full_every``) everything is unfrozen and collected in one deliberate pass.

The youngest generation is collected every :data:`YOUNG_THRESHOLD` net allocations instead of
CPython's 700. Nearly every object kadmit makes (a decoded watch event, a request's JSON) is freed
by reference counting before that, so collecting more often finds little and costs time. On
bench/scalability.py (scale 0.2, 30 s) the defaults spent about 15 % of each process's CPU
collecting (3 s of 20 s: 2,200 young, 200 middle and 19 full collections); this threshold 3 to
6 % (130, 12 and 2). The longest pauses moved from 12 / 25 / 274 ms (young / middle / full) to
34 / 117 / 170 ms: far fewer full collections, each middle one longer.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

logger = logging.getLogger(__name__)

YOUNG_THRESHOLD = 10_000


def configure() -> None:
    """Collect the young generation every :data:`YOUNG_THRESHOLD` allocations (process-wide)."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)


def freeze() -> None:
    """Everything alive now is long-lived: keep it out of automatic collections."""
    gc.freeze()


def collect_all() -> float:
    """Unfreeze, collect everything, freeze again; the seconds it took."""
    started = time.perf_counter()
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    return time.perf_counter() - started


async def run(freeze_every: float = 60.0, full_every: float = 3600.0) -> None:
    """Freeze the survivors every ``freeze_every`` seconds and collect everything every ``full_every``."""
    since_full = 0.0
    while True:
        await asyncio.sleep(freeze_every)
        since_full += freeze_every
        if since_full >= full_every:
            since_full = 0.0
            took = collect_all()
            logger.debug("full garbage collection took %.0f ms", took * 1000)
        else:
            freeze()
