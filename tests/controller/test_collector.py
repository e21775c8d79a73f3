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


async def test_run_freezes_survivors_and_collects_everything_on_its_schedule() -> None:
    gc.collect()
    gc.unfreeze()
    ref = cycle()
    task = asyncio.create_task(collector.run(freeze_every=0.01, full_every=1000))
    await asyncio.sleep(0.05)
    assert gc.get_freeze_count() > 0 and ref() is not None
    task.cancel()
    gc.unfreeze()
    ref = cycle()
    task = asyncio.create_task(collector.run(freeze_every=0.01, full_every=0.02))
    await asyncio.sleep(0.1)
    task.cancel()
    assert ref() is None


def test_configure_collects_the_young_generation_less_often_and_keeps_the_older_thresholds() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        collector.configure()
        assert gc.get_threshold() == (collector.YOUNG_THRESHOLD, 10, 10)
        # garbage made between two young collections is still collected: a cycle is freed by one
        ref = cycle()
        gc.collect(0)
        assert ref() is None
    finally:
        gc.set_threshold(*before)
