"""Keyed workers: a failing key is retried with a growing delay, a success forgets its failures."""

from __future__ import annotations

import asyncio

import pytest

from kadmit.controller import workers
from kadmit.controller.kube import ApiError
from kadmit.controller.workers import KeyedReconciler


class Flaky(KeyedReconciler):
    what = "test"

    def __init__(self, failures: int) -> None:
        super().__init__(workers=1)
        self.failures = failures
        self.calls: list[float] = []
        self.done = asyncio.Event()

    async def reconcile(self, namespace: str, name: str) -> None:
        self.calls.append(asyncio.get_running_loop().time())
        if len(self.calls) <= self.failures:
            raise ApiError(409, "Conflict", "changed") if len(self.calls) % 2 else RuntimeError("boom")
        self.done.set()


async def test_retries_back_off_and_stop_after_success(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "FIRST_RETRY", 0.02)
    flaky = Flaky(failures=3)
    await flaky.start()
    flaky.queue.add(("ns", "a"))
    async with asyncio.timeout(5):
        await flaky.done.wait()
    await asyncio.sleep(0.1)  # no further retry once it succeeded
    await flaky.stop()
    assert len(flaky.calls) == 4
    gaps = [b - a for a, b in zip(flaky.calls, flaky.calls[1:], strict=False)]
    assert gaps[0] >= 0.015 and gaps[1] >= 0.035 and gaps[2] >= 0.075  # 0.02, 0.04, 0.08
    assert flaky._failures == {}
