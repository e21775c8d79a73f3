"""The I/O layer on a bad day: watches that end at once, hung and skewed Lease renewals.

Each case is one the reliability issue reproduced: 3,164 re-watches in 5 s on a watch that closed
at once; two leaders for 21.9 s behind a hung renewal; a healthy leader's Lease taken by a replica
whose clock ran 10 s ahead.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from kadmit.kube import Client, Informer, LeaderElector, LeaseTiming, NotFound, Resource
from kadmit.kube.errors import Conflict
from tests.kube.fakeapi import FakeApiServer

Obj = dict[str, Any]


async def test_a_watch_that_ends_at_once_is_reopened_with_backoff(fake_api: tuple[FakeApiServer, str],
                                                                   fake_client: Client) -> None:
    fake, _ = fake_api
    fake.end_watches_at_once = True
    informer = Informer(fake_client, Resource("example.com", "v1", "things", "Thing"), namespace="ns",
                        backoff_initial=0.05, backoff_max=0.4)
    await informer.start()
    await informer.wait_synced()
    await asyncio.sleep(1.5)
    await informer.stop()
    # 0.05, 0.1, 0.2, 0.4, 0.4, ... (jittered): a handful, not thousands.
    assert 3 <= fake.watch_calls <= 10, fake.watch_calls


class Leases:
    """An API server's Leases: conditional writes, and a switch that makes one replica's calls hang."""

    def __init__(self) -> None:
        self.lease: Obj | None = None
        self.version = 0
        self.hung: set[str] = set()

    def client(self, identity: str) -> Any:
        leases = self

        class LeaseClient:
            async def _maybe_hang(self) -> None:
                if identity in leases.hung:
                    await asyncio.Event().wait()  # forever: only the caller's deadline ends it

            async def get(self, resource: Resource, namespace: str | None, name: str) -> Obj:
                await self._maybe_hang()
                if leases.lease is None:
                    raise NotFound(404, "NotFound", "no lease")
                return copy.deepcopy(leases.lease)

            async def create(self, resource: Resource, obj: Obj) -> Obj:
                await self._maybe_hang()
                if leases.lease is not None:
                    raise Conflict(409, "AlreadyExists", "exists")
                return leases._store(obj)

            async def replace(self, resource: Resource, obj: Obj) -> Obj:
                await self._maybe_hang()
                assert leases.lease is not None
                if obj["metadata"]["resourceVersion"] != leases.lease["metadata"]["resourceVersion"]:
                    raise Conflict(409, "Conflict", "stale")
                return leases._store(obj)

        return LeaseClient()

    def _store(self, obj: Obj) -> Obj:
        self.version += 1
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        self.lease = obj
        return copy.deepcopy(obj)


class Replica:
    """One elector, with a log of when it believed it led (on_started / on_stopped)."""

    def __init__(self, leases: Leases, identity: str, log: list[tuple[float, str, str]],
                 clock_skew: float = 0.0) -> None:
        loop = asyncio.get_running_loop()

        async def started() -> None:
            log.append((loop.time(), identity, "start"))

        async def stopped() -> None:
            log.append((loop.time(), identity, "stop"))

        self.elector = LeaderElector(
            leases.client(identity), "ns", "lease", identity, timing=LeaseTiming(1.0, 0.6, 0.1),
            on_started_leading=started, on_stopped_leading=stopped,
            clock=lambda: loop.time() + 1_700_000_000 + clock_skew)
        self.task = asyncio.create_task(self.elector.run())

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


Spans = dict[str, list[tuple[float, float]]]


def leading_intervals(log: list[tuple[float, str, str]], until: float) -> Spans:
    intervals: Spans = {}
    began: dict[str, float] = {}
    for when, who, what in log:
        if what == "start":
            began[who] = when
        elif who in began:
            intervals.setdefault(who, []).append((began.pop(who), when))
    for who, when in began.items():
        intervals.setdefault(who, []).append((when, until))
    return intervals


def overlap(intervals: Spans) -> float:
    """The longest time two replicas both believed they led."""
    flat = [(a, b, who) for who, spans in intervals.items() for a, b in spans]
    worst = 0.0
    for i, (a1, b1, w1) in enumerate(flat):
        for a2, b2, w2 in flat[i + 1:]:
            if w1 != w2:
                worst = max(worst, min(b1, b2) - max(a1, a2))
    return worst


async def test_a_hung_renewal_steps_down_before_another_replica_takes_over() -> None:
    for _ in range(5):
        leases, log = Leases(), []
        first = Replica(leases, "first", log)
        await asyncio.sleep(0.3)
        second = Replica(leases, "second", log)
        await asyncio.sleep(0.3)
        leases.hung.add("first")  # its renewals now hang (a partitioned node, a stuck connection)
        await asyncio.sleep(2.5)
        now = asyncio.get_running_loop().time()
        await first.stop()
        await second.stop()
        spans = leading_intervals(log, now)
        assert [who for _, who, what in log if what == "start"] == ["first", "second"], log
        assert overlap(spans) <= 0.0, spans  # never two leaders acting


async def test_clock_skew_neither_delays_a_takeover_nor_steals_a_healthy_lease() -> None:
    for skew in (-20.0, 10.0, 20.0):
        leases, log = Leases(), []
        first = Replica(leases, "first", log)
        await asyncio.sleep(0.3)
        second = Replica(leases, "second", log, clock_skew=skew)
        await asyncio.sleep(1.5)  # longer than the Lease: a skewed clock would call it expired
        assert [who for _, who, what in log if what == "start"] == ["first"], (skew, log)
        await first.stop()  # dies without releasing: the Lease stops changing
        died = asyncio.get_running_loop().time()
        while not any(who == "second" and what == "start" for _, who, what in log):
            await asyncio.sleep(0.05)
            assert asyncio.get_running_loop().time() - died < 3.0, (skew, log)
        took = next(when for when, who, what in log if who == "second" and what == "start") - died
        assert took <= 1.0 + 0.6, (skew, took)  # within the Lease's duration, as observed
        await second.stop()
