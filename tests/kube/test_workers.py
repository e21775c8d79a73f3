"""Keyed workers: a failing key is retried with a growing delay, a success forgets its failures."""

from __future__ import annotations

import asyncio

from kadmit.kube import ApiError, KeyedReconciler, TooManyRequests, Workers


class Flaky(KeyedReconciler):
    what = "test"

    def __init__(self, failures: int) -> None:
        super().__init__(workers=1)
        self.workers = Workers("test", self._reconcile_key, base_delay=0.02)
        self.failures = failures
        self.calls: list[float] = []
        self.done = asyncio.Event()

    async def reconcile(self, namespace: str, name: str) -> None:
        self.calls.append(asyncio.get_running_loop().time())
        if len(self.calls) <= self.failures:
            raise ApiError(409, "Conflict", "changed") if len(self.calls) % 2 else RuntimeError("boom")
        self.done.set()


async def test_retries_back_off_and_stop_after_success() -> None:
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
    assert flaky.queue.requeues(("ns", "a")) == 0  # forgotten after the success


async def test_a_servers_retry_after_is_honoured() -> None:
    calls: list[float] = []
    done = asyncio.Event()

    async def throttled(key: str) -> None:
        calls.append(asyncio.get_running_loop().time())
        if len(calls) == 1:
            raise TooManyRequests(429, "TooManyRequests", "slow down", retry_after=0.3)
        done.set()

    loop = Workers("throttled", throttled, base_delay=0.01)
    await loop.start(["k"])
    async with asyncio.timeout(5):
        await done.wait()
    await loop.stop()
    assert calls[1] - calls[0] >= 0.28  # not the 0.01 s of its own backoff
