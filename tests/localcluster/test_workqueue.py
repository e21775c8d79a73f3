"""The local cluster's work queue: delayed adds on the loop the local cluster runs on."""

from __future__ import annotations

import asyncio

import pytest

from kadmit.localcluster.workqueue import WorkQueue


def test_delayed_adds_under_half_a_millisecond_on_uvloop() -> None:
    """uvloop gives a plain Handle (no ``when()``) for a timer due in under 0.5 ms: a later, longer
    delay must neither fail nor push back the key already due."""
    uvloop = pytest.importorskip("uvloop")

    async def main() -> list[str]:
        queue: WorkQueue[str] = WorkQueue()
        seen: list[str] = []
        done = asyncio.Event()

        async def reconcile(key: str) -> None:
            seen.append(key)
            if len(seen) == 2:
                done.set()

        worker = asyncio.create_task(queue.run_worker(reconcile))
        queue.add_after("x", 0.0002)
        queue.add_after("y", 5.0)  # later than the head: the head's timer stays
        queue.add_after("y", 0.0003)
        await asyncio.wait_for(done.wait(), timeout=1.0)
        worker.cancel()
        queue.close()
        return seen

    assert uvloop.run(main()) == ["x", "y"]
