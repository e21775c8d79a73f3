"""Queue status in proportion to change: bursts fold into a few writes per queue, finished work
reports empty at once, a slow or failing queue delays no other, and dependents follow."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kadmit.controller import queue_stats
from kadmit.controller.config import Configuration
from kadmit.controller.metrics import Metrics
from kadmit.controller.queue_status import QueueStatusReconciler
from kadmit.engine import Engine
from kadmit.kube import Resource
from kadmit.kube.resources import (
    ADMISSION_CHECKS,
    CLUSTER_QUEUES,
    COHORTS,
    LOCAL_QUEUES,
    RESOURCE_FLAVORS,
    WORKLOADS,
)
from tests.controller.queue_fakes import (
    FakeApi,
    FakeInformers,
    Obj,
    admitted,
    cluster_queue,
    cohort,
    finished,
    flavor,
    local_queue,
    workload,
)

DELAY = 0.02  # events fold into one look this long
INTERVAL = 0.1  # between two writes of one queue, at least


@dataclass
class Setup:
    api: FakeApi
    engine: Engine
    status: QueueStatusReconciler
    status_informers: FakeInformers


def make(
    engine: Engine | None = None, *, delay: float = DELAY, interval: float = INTERVAL, workers: int = 4
) -> Setup:
    engine = engine or Engine()
    informers = FakeInformers()
    api = FakeApi(informers, engine)
    status = QueueStatusReconciler(
        api,  # type: ignore[arg-type]
        engine,
        informers,  # type: ignore[arg-type]
        delay=delay,
        interval=interval,
        workers=workers,
    )
    return Setup(api, engine, status, informers)


@pytest.fixture
async def setup() -> AsyncIterator[Setup]:
    s = make()
    s.api.apply(RESOURCE_FLAVORS, flavor())
    for cq in ("a", "b"):
        s.api.apply(CLUSTER_QUEUES, cluster_queue(cq))
        for i in range(2):
            s.api.apply(LOCAL_QUEUES, local_queue(f"{cq}{i}", cq))
    await s.status.start()
    await until(lambda: all(s.api.status(CLUSTER_QUEUES, cq).get("conditions") for cq in ("a", "b")))
    yield s
    await s.status.stop()


async def until(test: Callable[[], bool], within: float = 5.0) -> float:
    """Seconds until ``test()`` held (polling every few ms); fails after ``within`` seconds."""
    started = time.perf_counter()
    while not test():
        if time.perf_counter() - started > within:
            raise AssertionError("timed out")
        await asyncio.sleep(0.005)
    return time.perf_counter() - started


def counts(status: Obj) -> tuple[int, int, int]:
    return (
        status.get("pendingWorkloads", -1),
        status.get("reservingWorkloads", -1),
        status.get("admittedWorkloads", -1),
    )


LQS = [("a0", "a"), ("a1", "a"), ("b0", "b"), ("b1", "b")]


def queue_of(i: int) -> tuple[str, str]:
    return LQS[i % len(LQS)]


async def test_a_burst_of_events_costs_a_few_writes_per_queue(setup: Setup) -> None:
    api = setup.api
    workloads = [workload(f"w{i}", queue_of(i)[0]) for i in range(1000)]

    async def burst(events: list[Obj]) -> float:
        """Feed the events, the event loop turning between them; the seconds that took."""
        api.writes.clear()
        started = time.perf_counter()
        for i, wl in enumerate(events):
            api.apply(WORKLOADS, wl)
            if i % 50 == 0:
                await asyncio.sleep(0)
        return time.perf_counter() - started

    took = await burst(workloads)
    await until(lambda: counts(api.status(CLUSTER_QUEUES, "a")) == (500, 0, 0))
    await until(lambda: all(counts(api.status(LOCAL_QUEUES, lq, "ns")) == (250, 0, 0) for lq, _ in LQS))
    await asyncio.sleep(3 * INTERVAL)
    # One write per queue per interval while the burst lasts, and one with the final state.
    assert max(api.writes.values()) <= took / INTERVAL + 2, (took, api.writes)

    took = await burst([admitted(wl, queue_of(i)[1]) for i, wl in enumerate(workloads)])
    await until(lambda: all(counts(api.status(LOCAL_QUEUES, lq, "ns")) == (0, 250, 250) for lq, _ in LQS))
    await until(lambda: counts(api.status(CLUSTER_QUEUES, "b")) == (0, 500, 500))
    assert api.status(CLUSTER_QUEUES, "b")["flavorsUsage"] == [
        {"name": "f", "resources": [{"name": "cpu", "total": "500", "borrowed": "400"}]}
    ]
    await asyncio.sleep(3 * INTERVAL)
    assert max(api.writes.values()) <= took / INTERVAL + 2, (took, api.writes)


async def test_finished_work_reports_empty_promptly_in_status_and_stats(setup: Setup) -> None:
    api, status = setup.api, setup.status
    running = []
    for i in range(400):
        lq, cq = queue_of(i)
        running.append(admitted(workload(f"w{i}", lq), cq))
        api.apply(WORKLOADS, running[-1])
    await until(lambda: counts(api.status(CLUSTER_QUEUES, "a")) == (0, 200, 200))
    for wl in running:  # they all finish at once
        api.apply(WORKLOADS, finished(wl))
    took = await until(
        lambda: (
            all(counts(api.status(CLUSTER_QUEUES, cq)) == (0, 0, 0) for cq in ("a", "b"))
            and all(counts(api.status(LOCAL_QUEUES, lq, "ns")) == (0, 0, 0) for lq, _ in LQS)
        )
    )
    assert took < INTERVAL + 1.0  # Kueue's target: within 2 s of the last finish
    assert api.status(LOCAL_QUEUES, "a0", "ns")["flavorsUsage"] == [
        {"name": "f", "resources": [{"name": "cpu", "total": "0"}]}
    ]
    # The metrics' counts: a Finished Workload is neither pending nor reserving.
    for name in ("a", "b"):
        cq = status.stats.cq(name)
        assert (cq.pending, cq.reserving, cq.admitted, cq.finished) == (0, 0, 0, 200)
    lq = status.stats.lq("ns", "a0")
    assert (lq.pending, lq.reserving, lq.finished) == (0, 0, 100)
    # Finished while still pending (deleted job, never admitted) is not pending either.
    api.apply(WORKLOADS, finished(workload("never-ran", "a0")))
    await asyncio.sleep(2 * INTERVAL)
    await until(lambda: counts(api.status(LOCAL_QUEUES, "a0", "ns")) == (0, 0, 0))
    assert status.stats.lq("ns", "a0").pending == 0


async def test_a_slow_or_failing_queue_delays_no_other() -> None:
    s = make(workers=2)
    api = s.api
    api.apply(RESOURCE_FLAVORS, flavor())
    for cq in ("slow", "flaky", "fine"):
        api.apply(CLUSTER_QUEUES, cluster_queue(cq))
        api.apply(LOCAL_QUEUES, local_queue(cq, cq))
    await s.status.start()
    try:
        await until(lambda: all(api.status(CLUSTER_QUEUES, cq) for cq in ("slow", "flaky", "fine")))
        gate = api.slow["slow"] = asyncio.Event()
        api.failures["flaky"] = 2
        for i, cq in enumerate(["slow", "flaky"] * 5 + ["fine"]):
            api.apply(WORKLOADS, workload(f"w{i}", cq))
        took = await until(lambda: counts(api.status(CLUSTER_QUEUES, "fine")) == (1, 0, 0))
        assert took < INTERVAL + 1.0  # while the slow queue's write hangs (a loaded machine may stall a bit)
        await until(lambda: counts(api.status(LOCAL_QUEUES, "fine", "ns")) == (1, 0, 0), within=1.0)
        # The flaky queue gets there after its backoff; the slow one as soon as its write returns.
        await until(lambda: counts(api.status(CLUSTER_QUEUES, "flaky")) == (5, 0, 0), within=5)
        assert counts(api.status(CLUSTER_QUEUES, "slow")) != (5, 0, 0)
        gate.set()
        await until(lambda: counts(api.status(CLUSTER_QUEUES, "slow")) == (5, 0, 0))
    finally:
        await s.status.stop()


async def test_no_queue_is_written_more_than_once_per_interval(setup: Setup) -> None:
    api = setup.api
    api.writes.clear()
    started = time.perf_counter()
    i = 0
    while time.perf_counter() - started < 10 * INTERVAL:  # a steady stream into one queue
        api.apply(WORKLOADS, workload(f"w{i}", "a0"))
        i += 1
        await asyncio.sleep(0.002)
    elapsed = time.perf_counter() - started
    await until(lambda: counts(api.status(LOCAL_QUEUES, "a0", "ns")) == (i, 0, 0))
    writes = api.writes[(LOCAL_QUEUES.plural, "ns", "a0")]
    assert 3 <= writes <= elapsed / INTERVAL + 2, (writes, i)
    assert api.writes[(CLUSTER_QUEUES.plural, None, "b")] == 0  # nothing happened there


async def test_a_lone_change_is_written_after_the_short_delay_not_the_interval() -> None:
    s = make(interval=1.0)
    api = s.api
    api.apply(RESOURCE_FLAVORS, flavor())
    api.apply(CLUSTER_QUEUES, cluster_queue("a"))
    api.apply(LOCAL_QUEUES, local_queue("a0", "a"))
    await s.status.start()
    try:
        await until(lambda: counts(api.status(LOCAL_QUEUES, "a0", "ns")) == (0, 0, 0))
        await asyncio.sleep(1.0)  # the first write is past
        api.apply(WORKLOADS, workload("w", "a0"))
        assert await until(lambda: counts(api.status(LOCAL_QUEUES, "a0", "ns")) == (1, 0, 0)) < 0.5
        api.apply(WORKLOADS, admitted(workload("w", "a0"), "a"))  # the next one waits its turn
        assert await until(lambda: counts(api.status(LOCAL_QUEUES, "a0", "ns")) == (0, 1, 1)) > 0.5
    finally:
        await s.status.stop()


async def test_a_written_status_is_not_looked_at_again(setup: Setup) -> None:
    api, writer = setup.api, setup.status.cluster_queue_writes
    api.apply(WORKLOADS, workload("w", "a0"))
    await until(lambda: counts(api.status(CLUSTER_QUEUES, "a")) == (1, 0, 0))
    await asyncio.sleep(3 * INTERVAL)  # the write's own watch event has come back
    looks, writes = writer.looks, writer.writes
    await asyncio.sleep(3 * INTERVAL)
    assert (writer.looks, writer.writes) == (looks, writes)


async def test_a_stopped_or_deleted_cluster_queue_turns_its_local_queues_inactive(setup: Setup) -> None:
    api = setup.api

    def active(resource: Resource, name: str, namespace: str | None = None) -> tuple[str, str]:
        conditions = api.status(resource, name, namespace).get("conditions", [])
        found = [c for c in conditions if c["type"] == "Active"]
        return (found[0]["status"], found[0]["reason"]) if found else ("", "")

    await until(lambda: active(LOCAL_QUEUES, "a0", "ns") == ("True", "Ready"))
    api.apply(CLUSTER_QUEUES, cluster_queue("a", stopPolicy="Hold"))
    await until(lambda: active(CLUSTER_QUEUES, "a") == ("False", "Stopped"))
    await until(lambda: active(LOCAL_QUEUES, "a0", "ns") == ("False", "ClusterQueueIsInactive"))
    await until(lambda: active(LOCAL_QUEUES, "a1", "ns") == ("False", "ClusterQueueIsInactive"))
    assert active(LOCAL_QUEUES, "b0", "ns") == ("True", "Ready")
    api.delete(CLUSTER_QUEUES, None, "a")
    await until(lambda: active(LOCAL_QUEUES, "a0", "ns") == ("False", "ClusterQueueDoesNotExist"))


async def test_a_flavor_or_check_appearing_activates_the_queues_naming_it() -> None:
    s = make()
    api = s.api
    api.apply(
        CLUSTER_QUEUES, cluster_queue("a", admissionChecksStrategy={"admissionChecks": [{"name": "check"}]})
    )
    api.apply(CLUSTER_QUEUES, cluster_queue("b"))
    await s.status.start()
    try:

        def reason(name: str) -> str:
            return next((c["reason"] for c in api.status(CLUSTER_QUEUES, name).get("conditions", [])), "")

        await until(lambda: reason("a") == "FlavorNotFound" and reason("b") == "FlavorNotFound")
        api.apply(RESOURCE_FLAVORS, flavor())
        await until(lambda: reason("a") == "AdmissionCheckNotFound" and reason("b") == "Ready")
        check = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": "check"},
            "spec": {"controllerName": "example.com/c"},
            "status": {
                "conditions": [{"type": "Active", "status": "True", "reason": "Ready", "message": ""}]
            },
        }
        api.apply(ADMISSION_CHECKS, check)
        await until(lambda: reason("a") == "Ready")
    finally:
        await s.status.stop()


async def test_cohort_status_has_its_weighted_share_under_fair_sharing() -> None:
    s = make(Engine(fair_sharing=True))
    api = s.api
    api.apply(RESOURCE_FLAVORS, flavor())
    api.apply(COHORTS, cohort("org"))
    api.apply(COHORTS, cohort("team", parent="org"))
    api.apply(COHORTS, cohort("others", parent="org"))
    api.apply(CLUSTER_QUEUES, cluster_queue("a", cpu="2", cohort="team"))
    api.apply(CLUSTER_QUEUES, cluster_queue("b", cpu="10", cohort="others"))
    api.apply(LOCAL_QUEUES, local_queue("a", "a"))
    await s.status.start()
    try:
        await until(lambda: api.status(COHORTS, "team").get("fairSharing") == {"weightedShare": 0})
        borrower = admitted(workload("big", "a", cpu="6"), "a")
        api.apply(WORKLOADS, borrower)
        await until(lambda: api.status(COHORTS, "team").get("fairSharing", {}).get("weightedShare", 0) > 0)
        assert api.status(COHORTS, "team")["fairSharing"]["weightedShare"] == s.engine.weighted_share("team")
        assert (
            api.status(CLUSTER_QUEUES, "a")["fairSharing"]["weightedShare"]
            == s.engine.weighted_share("a")
            > 0
        )
        api.apply(WORKLOADS, finished(borrower))
        await until(lambda: api.status(COHORTS, "team").get("fairSharing") == {"weightedShare": 0})
        await until(lambda: api.status(CLUSTER_QUEUES, "a").get("fairSharing") == {"weightedShare": 0})
    finally:
        await s.status.stop()


async def test_without_fair_sharing_cohorts_have_no_fair_sharing_status() -> None:
    s = make()
    api = s.api
    api.apply(COHORTS, {**cohort("team"), "status": {"fairSharing": {"weightedShare": 7}}})
    await s.status.start()
    try:
        await until(lambda: "fairSharing" not in api.status(COHORTS, "team"))
    finally:
        await s.status.stop()


async def test_neither_status_nor_stats_walk_every_workload(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_full_pass(*_: object) -> None:
        raise AssertionError("a full pass over the Workloads")

    monkeypatch.setattr(queue_stats, "compute", no_full_pass)
    api = setup.api
    api.apply(WORKLOADS, admitted(workload("w", "b1"), "b"))
    await until(lambda: counts(api.status(LOCAL_QUEUES, "b1", "ns")) == (0, 1, 1))
    assert setup.status.stats.cq("b").admitted == 1


async def test_the_gauges_read_the_kept_counts(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queue_stats, "compute", lambda *_: pytest.fail("a scrape walked every Workload"))
    metrics = Metrics()
    metrics.manager = SimpleNamespace(  # type: ignore[assignment]
        synced=True,
        queue_status=setup.status,
        informers=setup.status_informers,
        engine=setup.engine,
        config=Configuration(),
    )
    api = setup.api

    def gauge(metric: str, **labels: str) -> float:
        labels["replica_role"] = "standalone"
        for family in text_string_to_metric_families(metrics.exposition().decode()):
            for sample in family.samples:
                if sample.name == metric and sample.labels == labels:
                    return float(sample.value)
        raise AssertionError(f"no {metric} {labels}")

    running = [admitted(workload(f"w{i}", "a0"), "a") for i in range(3)]
    for wl in running:
        api.apply(WORKLOADS, wl)
    api.apply(WORKLOADS, workload("waiting", "a1"))
    assert gauge("kueue_admitted_active_workloads", cluster_queue="a") == 3
    assert gauge("kueue_pending_workloads", cluster_queue="a", status="active") == 1
    assert gauge("kueue_local_queue_pending_workloads", name="a1", namespace="ns", status="active") == 1
    for wl in [*running, workload("waiting", "a1")]:
        api.apply(WORKLOADS, finished(wl))
    assert gauge("kueue_reserving_active_workloads", cluster_queue="a") == 0
    assert gauge("kueue_pending_workloads", cluster_queue="a", status="active") == 0
    assert gauge("kueue_local_queue_pending_workloads", name="a1", namespace="ns", status="active") == 0
    assert gauge("kueue_local_queue_reserving_active_workloads", name="a0", namespace="ns") == 0
    assert gauge("kueue_finished_workloads", cluster_queue="a") == 4
    assert gauge("kueue_local_queue_finished_workloads", name="a0", namespace="ns") == 3
