"""The deduplicating key queue under the runner."""

from __future__ import annotations

import asyncio

import pytest

from kadmit.kube.workqueue import WorkQueue


async def test_a_waiting_key_is_queued_once_and_a_busy_key_again_after_done() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.add("a")
    queue.add("b")
    assert len(queue) == 2
    key = await queue.get()
    assert key == "a"
    queue.add("a")  # while "a" is being processed: dirty, not queued
    assert len(queue) == 1
    queue.done("a")
    assert len(queue) == 2
    assert [await queue.get(), await queue.get()] == ["b", "a"]


async def test_delayed_adds_keep_the_earliest_deadline() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("x", 5.0)
    queue.add_after("x", 0.01)
    queue.add_after("x", 3.0)
    got = await asyncio.wait_for(queue.get(), timeout=1.0)
    assert got == "x"
    queue.shutdown()


def test_delayed_adds_under_half_a_millisecond_on_uvloop() -> None:
    """uvloop, kadmit's loop in production, gives a plain Handle (no ``when()``) for a timer due in
    under 0.5 ms; a later add for the same key must still compare deadlines and keep the earliest."""
    uvloop = pytest.importorskip("uvloop")

    async def main() -> list[str]:
        queue: WorkQueue[str] = WorkQueue()
        queue.add_after("x", 0.0002)
        queue.add_after("x", 5.0)  # later than the one set: kept as it was
        queue.add_after("y", 5.0)
        queue.add_after("y", 0.0002)  # earlier: replaces the 5 s timer
        got = [await asyncio.wait_for(queue.get(), timeout=1.0) for _ in range(2)]
        queue.shutdown()
        return got

    assert sorted(uvloop.run(main())) == ["x", "y"]
