"""The collector policy: frozen objects are skipped by automatic collections, and a full pass still
frees the cyclic garbage among them."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from kadmit.controller import collector


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()


def cycle() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_frozen_cycles_survive_collections_until_a_full_pass() -> None:
    gc.collect()
    ref = cycle()
    collector.freeze()
    gc.collect()
    assert ref() is not None, "a frozen object is not walked by a collection"
    assert gc.get_freeze_count() > 0
    took = collector.collect_all()
    assert ref() is None, "the full pass frees the garbage that was frozen"
    assert took >= 0 and gc.get_freeze_count() > 0, "and freezes the survivors again"


async def test_run_collects_everything_frozen_or_not_on_its_schedule() -> None:
    gc.collect()
    ref = cycle()
    collector.freeze()
    task = asyncio.create_task(collector.run(full_every=1000))
    await asyncio.sleep(0.05)
    assert ref() is not None, "nothing before the schedule says so"
    task.cancel()
    task = asyncio.create_task(collector.run(full_every=0.02))
    await asyncio.sleep(0.1)
    task.cancel()
    assert ref() is None
    assert gc.get_freeze_count() > 0, "the survivors are frozen again"


def test_configure_makes_young_collections_short_and_no_middle_or_full_one_automatic() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        collector.configure()
        assert gc.get_threshold() == (1_000, collector.NO_AUTOMATIC_MIDDLE, collector.NO_AUTOMATIC_FULL)
        # garbage made between two young collections is still collected: a cycle is freed by one
        ref = cycle()
        gc.collect(0)
        assert ref() is None
        # a cycle that died after surviving a young collection waits for the deliberate full pass,
        # however many automatic collections run meanwhile
        a, b = Node(), Node()
        a.other, b.other = b, a
        gc.collect(0)  # a and b are alive: they move to the middle generation
        old = weakref.ref(a)
        del a, b
        young, middle, full = (gc.get_stats()[g]["collections"] for g in (0, 1, 2))
        for _ in range(50):
            kept = [[i] for i in range(20_000)]  # net allocations: young collections run
            del kept
        assert gc.get_stats()[0]["collections"] > young
        assert gc.get_stats()[1]["collections"] == middle, "no automatic middle collection"
        assert gc.get_stats()[2]["collections"] == full, "no automatic full collection"
        assert old() is not None
        gc.collect()
        assert old() is None
    finally:
        gc.set_threshold(*before)
