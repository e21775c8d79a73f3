"""Four of Kueue's scheduling rules kadmit once missed (issue 14), each on the engine alone:
a head that cannot be sure to reclaim holds back its quota, hierarchical reclaim ignores
priority, fair sharing lets a borrowing queue preempt, and requeuing by creation time."""

from __future__ import annotations

from typing import Any

import pytest

from kadmit.engine import Engine
from kadmit.engine.timestamps import format_time
from tests.engine.conftest import (
    T0,
    admitted_names,
    admitted_status,
    cluster_queue,
    cohort,
    flavor,
    local_queue,
    pending_by_name,
    quotas,
    workload,
)


def _engine(*objects: dict[str, Any], **options: Any) -> Engine:
    engine = Engine(**options)
    for obj in objects:
        engine.upsert(obj)
    return engine


def _running(name: str, queue: str, cq: str, cpu: int, priority: int = 0, at: float = 0) -> dict[str, Any]:
    return workload(
        name,
        queue,
        priority=priority,
        created=at,
        status=admitted_status(cq, {"cpu": "f"}, {"cpu": str(cpu)}, at=at),
    )


def _foundation(
    reclaim: str,
    strategy: str = "StrictFIFO",
    cpu: Any = 2,
    borrow: str | None = None,
    **options: Any,
) -> Engine:
    """Kueue's "Reserving Resources in Cohort": foundation (2 cpu) lends to best-effort (0)."""
    preemption: dict[str, Any] = {"reclaimWithinCohort": reclaim}
    if borrow:
        preemption["borrowWithinCohort"] = {"policy": borrow}
    return _engine(
        flavor("f"),
        cluster_queue(
            "foundation",
            quotas({"f": {"cpu": cpu}}),
            cohort="cohort",
            queueingStrategy=strategy,
            preemption=preemption,
        ),
        cluster_queue("best-effort", quotas({"f": {"cpu": 0}}), cohort="cohort"),
        local_queue("lq-f", "foundation"),
        local_queue("lq-b", "best-effort"),
        _running("f1", "lq-f", "foundation", 1, priority=1000),
        **options,
    )


def test_blocked_strict_fifo_head_holds_back_quota_it_cannot_be_sure_to_reclaim() -> None:
    engine = _foundation("LowerPriority")
    engine.upsert_workload(workload("f2", "lq-f", cpu="2", priority=1000, created=1))
    first = engine.schedule(T0)
    assert first.reservations == []
    assert pending_by_name(first)["f2"][0] == "WaitingForQuota"
    # Later cycles: the head is still blocked, and still holds back foundation's idle cpu.
    for i in range(2):
        engine.upsert_workload(workload(f"b{i}", "lq-b", cpu="1", priority=0, created=10 + i))
    later = engine.schedule(T0 + 10)
    assert later.reservations == []
    assert pending_by_name(later)["b0"][0] == "WaitingForQuota"
    # f1 finishes: the head is admitted, the best-effort workloads still are not.
    engine.finish("default", "f1")
    done = engine.schedule(T0 + 20)
    assert admitted_names(done) == ["f2"]


def test_head_that_can_always_reclaim_lets_others_borrow_meanwhile() -> None:
    engine = _foundation("Any")
    engine.upsert_workload(workload("f2", "lq-f", cpu="2", priority=1000, created=1))
    assert engine.schedule(T0).reservations == []
    for i in range(2):
        engine.upsert_workload(workload(f"b{i}", "lq-b", cpu="1", priority=0, created=10 + i))
    assert admitted_names(engine.schedule(T0 + 10)) == ["b0"]
    engine.finish("default", "f1")
    reclaim = engine.schedule(T0 + 20)
    assert [(p.victim[1], p.reason) for p in reclaim.preemptions] == [("b0", "InCohortReclamation")]
    assert reclaim.reservations == []  # b1 may not take what the preemptor freed
    engine.release("default", "b0")
    assert admitted_names(engine.schedule(T0 + 30)) == ["f2"]


def test_best_effort_head_holds_back_only_for_its_cycle() -> None:
    """Kueue's TestSchedule "capacity blocked when lending clusterqueue not guaranteed to
    reclaim (ReclaimWithinCohort=LowerPriority)": in the same cycle another queue's head may
    not borrow what the head holds back."""
    engine = _foundation("LowerPriority", strategy="BestEffortFIFO", max_rounds=1)
    engine.upsert_workload(workload("f2", "lq-f", cpu="2", priority=0, created=0))
    engine.upsert_workload(workload("b1", "lq-b", cpu="1", priority=0, created=5))
    decisions = engine.schedule(T0)
    assert decisions.reservations == []
    pending = pending_by_name(decisions)
    assert pending["f2"] == (
        "WaitingForQuota",
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor f, "
        "1 more needed",
    )
    assert pending["b1"] == ("WaitingForQuota", "Workload no longer fits after processing another workload")
    # In the next cycle f2 waits for an event, and b1 may borrow.
    assert admitted_names(engine.schedule(T0 + 1)) == ["b1"]


def test_third_queue_may_still_borrow_what_is_not_held_back() -> None:
    """A blocked head that would borrow (it may preempt while borrowing) holds back up to its
    borrowing limit: the rest of a third queue's idle quota stays lendable."""
    engine = _foundation("LowerPriority", cpu=(2, 1), borrow="LowerPriority")  # borrowingLimit 1
    engine.upsert(cluster_queue("spare", quotas({"f": {"cpu": 2}}), cohort="cohort"))
    engine.upsert_workload(workload("f2", "lq-f", cpu="3", priority=1000, created=1))
    engine.schedule(T0)
    for i in range(2):
        engine.upsert_workload(workload(f"b{i}", "lq-b", cpu="1", priority=0, created=10 + i))
    # 4 cpu in the cohort: f1 uses 1, f2 holds back 2 (1 + 1 + 1 - 1), one is left for b0.
    assert admitted_names(engine.schedule(T0 + 10)) == ["b0"]


def test_hierarchical_reclaim_preempts_a_higher_priority_borrower() -> None:
    """Kueue's "workloads in guaranteed cq should have preferential access to the resources"."""
    preemption = {"reclaimWithinCohort": "Any"}
    engine = _engine(
        flavor("f"),
        cohort("root"),
        cohort("guaranteed", parent="root", groups=quotas({"f": {"cpu": 3}})),
        cluster_queue("guaranteed", quotas({"f": {"cpu": 0}}), cohort="guaranteed", preemption=preemption),
        cluster_queue("best-effort", quotas({"f": {"cpu": 0}}), cohort="root", preemption=preemption),
        local_queue("lq-g", "guaranteed"),
        local_queue("lq-b", "best-effort"),
    )
    engine.upsert_workload(workload("high", "lq-b", cpu="3", priority=100, created=0))
    assert admitted_names(engine.schedule(T0)) == ["high"]
    engine.upsert_workload(workload("mid", "lq-g", cpu="3", priority=50, created=1))
    decisions = engine.schedule(T0 + 1)
    assert [(p.victim[1], p.reason) for p in decisions.preemptions] == [("high", "InCohortReclamation")]
    assert "preemptor path: /root/guaranteed/guaranteed; preemptee path: /root/best-effort" in (
        decisions.preemptions[0].message
    )
    engine.release("default", "high")
    assert admitted_names(engine.schedule(T0 + 2)) == ["mid"]


def _settle(engine: Engine, start: float) -> float:
    """Cycles until nothing changes, releasing victims as their jobs would stop."""
    now = start
    for _ in range(50):
        decisions = engine.schedule(now)
        for p in decisions.preemptions:
            engine.release(*p.victim, now=now)
        now += 1
        if not decisions.reservations and not decisions.preemptions:
            return now
    raise AssertionError("did not settle")


def _usage(engine: Engine, cq: str) -> int:
    return engine.usage(cq).get(("f", "cpu"), 0) // 1000


@pytest.mark.parametrize(("c_weight", "expected"), [(None, (3, 3)), ("2", (2, 4))])
def test_fair_sharing_reclaims_from_a_borrowing_sibling_with_idle_quota_elsewhere(
    c_weight: str | None, expected: tuple[int, int]
) -> None:
    preemption = {"reclaimWithinCohort": "Any"}
    c_spec: dict[str, Any] = {"preemption": preemption}
    if c_weight:
        c_spec["fairSharing"] = {"weight": c_weight}
    engine = _engine(
        flavor("f"),
        cluster_queue("a", quotas({"f": {"cpu": 6}}), cohort="team"),
        cluster_queue("b", quotas({"f": {"cpu": 0}}), cohort="team", preemption=preemption),
        cluster_queue("c", quotas({"f": {"cpu": 0}}), cohort="team", **c_spec),
        local_queue("lq-b", "b"),
        local_queue("lq-c", "c"),
        fair_sharing=True,
    )
    for i in range(6):
        engine.upsert_workload(_running(f"b{i}", "lq-b", "b", 1, at=i))
    for i in range(6):
        engine.upsert_workload(workload(f"c{i}", "lq-c", cpu="1", created=10 + i))
    _settle(engine, T0 + 100)
    assert (_usage(engine, "b"), _usage(engine, "c")) == expected


def _evicted_by_timeout(name: str, created: float, evicted_at: float) -> dict[str, Any]:
    return workload(
        name,
        cpu="3",
        created=created,
        status={
            "conditions": [
                {
                    "type": "Evicted",
                    "status": "True",
                    "reason": "PodsReadyTimeout",
                    "message": "Exceeded the PodsReady timeout default/" + name,
                    "lastTransitionTime": format_time(T0 + evicted_at),
                },
                {
                    "type": "QuotaReserved",
                    "status": "False",
                    "reason": "Pending",
                    "message": "",
                    "lastTransitionTime": format_time(T0 + evicted_at),
                },
            ]
        },
    )


@pytest.mark.parametrize(("timestamp", "first"), [("Eviction", "newer"), ("Creation", "requeued")])
def test_requeuing_timestamp_orders_workloads_evicted_by_the_pods_ready_timeout(
    timestamp: str, first: str
) -> None:
    engine = _engine(
        flavor("f"),
        cluster_queue("cq", quotas({"f": {"cpu": 4}}), queueingStrategy="StrictFIFO"),
        local_queue("lq", "cq"),
        requeuing_timestamp=timestamp,
    )
    engine.upsert_workload(_evicted_by_timeout("requeued", created=0, evicted_at=50))
    engine.upsert_workload(workload("newer", cpu="3", created=10))
    assert admitted_names(engine.schedule(T0 + 100)) == [first]


def test_requeuing_timestamp_is_validated() -> None:
    from kadmit.engine import UnsupportedConfiguration

    with pytest.raises(UnsupportedConfiguration, match=r"requeuingStrategy\.timestamp"):
        Engine(requeuing_timestamp="Admission")
