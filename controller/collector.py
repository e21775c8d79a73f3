"""Garbage collection without long pauses, or walks it need not make, in a process that holds a
large model.

Every pause of the collector holds the event loop, and with it every webhook request the API
server is waiting on. Two things make CPython's pauses long here, and a third makes it walk the
same objects twice:

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
  = 1,000 net allocations they pause 1.4 ms at p50 and 10 ms at most, for about the same total:
  each survivor is walked once per generation either way, only in smaller pieces.
* **Middle (generation 1) collections walk every survivor of the young ones a second time**, to
  find the cyclic garbage among them. kadmit makes little: since the engine's victim search no
  longer leaves a reference cycle behind (it left 13,000 of its candidates to the collector in a
  short run), the middle collections of Kueue's baseline test found 1,123 unreachable objects in
  two minutes, most of them made at start-up, and took 3.6 s of kadmit's 86 CPU s (the young ones
  6.1 s). None is automatic (:data:`NO_AUTOMATIC_MIDDLE`): what survives a young collection stays
  in the middle generation, unwalked, until the deliberate full pass.

:func:`configure` runs before kadmit loads anything big: the automatic full collections CPython
makes while ``kadmit local`` parses its manifests (14 of them, 1.7 s) go too.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

logger = logging.getLogger(__name__)

YOUNG_THRESHOLD = 1_000
NO_AUTOMATIC_FULL = 2**31 - 1
"""The oldest generation's threshold (a C int): more middle collections than a process makes."""
NO_AUTOMATIC_MIDDLE = 2**31 - 1
"""The middle generation's threshold (a C int): more young collections than a process makes."""


def configure() -> None:
    """Short young collections, no automatic middle or full ones (process-wide)."""
    gc.set_threshold(YOUNG_THRESHOLD, NO_AUTOMATIC_MIDDLE, NO_AUTOMATIC_FULL)


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
