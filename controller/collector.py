"""Garbage collection without long pauses in a process that holds a large model.

Every pause of the collector holds the event loop, and with it every webhook request the API
server is waiting on. Two things make CPython's pauses long here:

* **Full (generation 2) collections walk every tracked object**: with 50,000 Workloads in the
  informer caches and the engine, 150 ms and more (bench/engine.py measured a 143 ms pause in the
  scheduler's loop). None is automatic (:data:`NO_AUTOMATIC_FULL`): what is alive once the caches
  are synced is frozen (:func:`freeze`, the permanent generation), and once in a while
  (``full_every``) everything is unfrozen and collected in one deliberate pass, which frees the
  cyclic garbage that reached the oldest generation meanwhile (on bench/scalability.py, 2,300 to
  2,800 objects after 35 s: the same as when CPython's automatic full passes ran between
  minutely freezes).
* **A young collection walks every object made since the last one that is still alive**, and
  CPython triggers it on *net* allocations (allocations minus deallocations). An informer event
  allocates the object's new version and frees the old one, so the young generation fills with
  survivors — the caches' new versions, the engine's model of them — while the count hardly
  moves. With the threshold at 10,000, young collections paused kadmit 11 ms at p50 and 31 ms at
  most, middle ones 90 to 122 ms (bench/scalability.py, scale 0.3). Every :data:`YOUNG_THRESHOLD`
  = 1,000 net allocations, and a middle collection every :data:`MIDDLE_THRESHOLD` = 5 young ones,
  they pause 1.4 ms at p50 and 10 ms at most, middle ones 6 ms at p50 and 16 ms at most, for about
  the same total: each survivor is walked once per generation either way, only in smaller pieces
  (on the full baseline, all collections together took 6.6 s of kadmit's 83 CPU s).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

logger = logging.getLogger(__name__)

YOUNG_THRESHOLD = 1_000
MIDDLE_THRESHOLD = 5
NO_AUTOMATIC_FULL = 2**31 - 1
"""The oldest generation's threshold (a C int): more middle collections than a process makes."""


def configure() -> None:
    """Short young and middle collections, no automatic full ones (process-wide)."""
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, NO_AUTOMATIC_FULL)


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


async def run(full_every: float = 3600.0) -> None:
    """Collect everything, frozen or not, every ``full_every`` seconds: the only full collections
    once :func:`configure` has run."""
    while True:
        await asyncio.sleep(full_every)
        took = collect_all()
        logger.debug("full garbage collection took %.0f ms", took * 1000)
