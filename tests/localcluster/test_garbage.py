"""The API server process's collector policy: short young and middle collections, no automatic
full one, and a periodic pass that frees the cyclic garbage that reached the oldest generation."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from kadmit.localcluster import cli


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture(autouse=True)
def restored() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)
    gc.unfreeze()


def old_cycle() -> weakref.ref[Node]:
    """A cycle that was alive through a middle collection, then died in the oldest generation."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    gc.collect(1)
    return weakref.ref(a)


async def test_no_automatic_full_collection_and_the_periodic_pass_frees_the_old_garbage() -> None:
    cli.collect_garbage_quickly()
    assert gc.get_threshold() == (1_000, 10, cli.NO_AUTOMATIC_FULL_COLLECTION)
    assert gc.get_freeze_count() > 0, "what exists once the server serves is frozen"
    ref = old_cycle()
    full = gc.get_stats()[2]["collections"]
    for _ in range(50):
        kept = [[i] for i in range(20_000)]  # net allocations: young and middle collections run
        del kept
    assert gc.get_stats()[2]["collections"] == full and ref() is not None
    task = asyncio.create_task(cli.collect_everything_periodically(every=0.02))
    await asyncio.sleep(0.1)
    task.cancel()
    assert ref() is None
    assert gc.get_freeze_count() > 0, "the survivors are frozen again"
