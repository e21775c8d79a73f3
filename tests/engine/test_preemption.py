"""Preemption (contract §5.4): policies, Kueue's victim order, minimal victim sets, reasons."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from kadmit.engine import Engine
from tests.engine.conftest import (
    T0,
    admitted_names,
    admitted_status,
    cluster_queue,
    flavor,
    load,
    local_queue,
    pending_by_name,
    quotas,
    workload,
)


def _running(name: str, cq: str, cpu: int, priority: int, at: float, queue: str = "lq") -> dict[str, Any]:
    return workload(
        name,
        queue,
        priority=priority,
        created=at,
        status=admitted_status(cq, {"cpu": "f"}, {"cpu": str(cpu)}, at=at),
    )


def _one_queue(policy: str, running: list[tuple[str, int, int, float]]) -> Engine:
    engine = load(
        flavor("f"),
        cluster_queue("cq", quotas({"f": {"cpu": 4}}), preemption={"withinClusterQueue": policy}),
        local_queue("lq", "cq"),
    )
    for name, cpu, priority, at in running:
        engine.upsert_workload(_running(name, "cq", cpu, priority, at))
    return engine


def victims(decisions: Any) -> dict[str, str]:
    return {p.victim[1]: p.reason for p in decisions.preemptions}


def test_within_cluster_queue_lower_priority_takes_newest_lowest_first() -> None:
    engine = _one_queue(
        "LowerPriority", [("old", 1, 1, 1), ("mid", 1, 1, 2), ("new", 1, 1, 3), ("high", 1, 5, 4)]
    )
    engine.upsert_workload(workload("preemptor", cpu="2", priority=10, created=10))
    decisions = engine.schedule(T0 + 100)
    assert victims(decisions) == {"new": "InClusterQueue", "mid": "InClusterQueue"}
    assert pending_by_name(decisions)["preemptor"][0] == "WaitingForPreemptedWorkloads"
    [preemption] = [p for p in decisions.preemptions if p.victim[1] == "new"]
    assert preemption.message.startswith("Preempted to accommodate a workload (UID: uid-preemptor, JobUID: ")
    assert (
        "due to prioritization in the ClusterQueue; preemptor path: /cq; preemptee path: /cq"
        in preemption.message
    )
    conditions = {c["type"]: (c["status"], c["reason"]) for c in preemption.conditions}
    assert conditions == {"Evicted": ("True", "Preempted"), "Preempted": ("True", "InClusterQueue")}
    # Waiting: no further preemption while the victims still hold their quota.
    again = engine.schedule(T0 + 101)
    assert again.preemptions == [] and again.reservations == []
    engine.release("default", "new")
    engine.release("default", "mid")
    assert admitted_names(engine.schedule(T0 + 102)) == ["preemptor"]


def test_minimal_victim_set_puts_back_what_is_not_needed() -> None:
    # Order tried: small(1 cpu, newest) then big(3 cpu); after taking both, small is not needed.
    engine = _one_queue("LowerPriority", [("big", 3, 1, 1), ("small", 1, 1, 2)])
    engine.upsert_workload(workload("preemptor", cpu="3", priority=10, created=10))
    assert victims(engine.schedule(T0)) == {"big": "InClusterQueue"}


@pytest.mark.parametrize(
    ("policy", "victim_priority", "victim_created", "expected"),
    [
        ("Never", 1, 1, {}),
        ("LowerPriority", 10, 1, {}),
        ("LowerPriority", 9, 1, {"v": "InClusterQueue"}),
        ("LowerOrNewerEqualPriority", 10, 20, {"v": "InClusterQueue"}),  # equal priority, newer
        ("LowerOrNewerEqualPriority", 10, 1, {}),  # equal priority, older
    ],
)
def test_within_cluster_queue_policies(
    policy: str, victim_priority: int, victim_created: float, expected: dict[str, str]
) -> None:
    engine = _one_queue(policy, [("v", 4, victim_priority, victim_created)])
    engine.upsert_workload(workload("preemptor", cpu="1", priority=10, created=10))
    decisions = engine.schedule(T0 + 100)
    assert victims(decisions) == expected
    if not expected:
        assert pending_by_name(decisions)["preemptor"][0] == "WaitingForQuota"


def _cohort(
    reclaim: str, borrow: dict[str, Any] | None = None, lender_priority: int = 1, idle_cpu: int = 0
) -> Engine:
    preemption: dict[str, Any] = {"reclaimWithinCohort": reclaim}
    if borrow:
        preemption["borrowWithinCohort"] = borrow
    engine = load(
        flavor("f"),
        cluster_queue("a", quotas({"f": {"cpu": 4}}), cohort="team", preemption=preemption),
        cluster_queue("b", quotas({"f": {"cpu": 4}}), cohort="team"),
        local_queue("lq-a", "a"),
        local_queue("lq-b", "b"),
    )
    if idle_cpu:  # a third queue lending what it does not use
        engine.upsert(cluster_queue("c", quotas({"f": {"cpu": idle_cpu}}), cohort="team"))
    # b borrows all of a's quota.
    for i in range(8):
        engine.upsert_workload(_running(f"b{i}", "b", 1, lender_priority, i, queue="lq-b"))
    return engine


@pytest.mark.parametrize(
    ("reclaim", "lender_priority", "expected"),
    [
        ("Never", 1, 0),
        ("Any", 100, 2),
        ("LowerPriority", 100, 0),
        ("LowerPriority", 1, 2),
    ],
)
def test_reclaim_within_cohort(reclaim: str, lender_priority: int, expected: int) -> None:
    engine = _cohort(reclaim, lender_priority=lender_priority)
    engine.upsert_workload(workload("a1", "lq-a", cpu="2", priority=10, created=100))
    decisions = engine.schedule(T0 + 200)
    assert len(decisions.preemptions) == expected
    assert {p.reason for p in decisions.preemptions} <= {"InCohortReclamation"}
    # The newest borrowed workloads go first.
    if expected:
        assert sorted(victims(decisions)) == ["b6", "b7"]
        assert "preemptor path: /team/a; preemptee path: /team/b" in decisions.preemptions[0].message


def test_a_reclaiming_search_leaves_no_cyclic_garbage() -> None:
    """Its candidates are freed when it returns, not when the collector finds them: a search
    that made a reference cycle kept thousands of candidates alive between two collections in
    Kueue's scalability test, and every collection had to walk them."""
    engine = _cohort("Any")
    engine.upsert_workload(workload("a1", "lq-a", cpu="2", priority=10, created=100))
    gc.collect()
    gc.disable()
    try:
        decisions = engine.schedule(T0 + 200)
        assert sorted(victims(decisions)) == ["b6", "b7"]
        assert gc.collect() == 0  # nothing unreachable that only the collector could free
    finally:
        gc.enable()


def test_victims_only_come_from_queues_that_borrow() -> None:
    engine = _cohort("Any")
    for i in range(8):
        engine.release("default", f"b{i}")
        engine.delete_workload("default", f"b{i}")
    for i in range(4):  # b within its nominal quota: nothing to reclaim
        engine.upsert_workload(_running(f"c{i}", "b", 1, 1, i, queue="lq-b"))
    engine.upsert_workload(workload("a1", "lq-a", cpu="5", priority=10, created=100))
    decisions = engine.schedule(T0 + 200)
    assert decisions.preemptions == []


@pytest.mark.parametrize(
    ("threshold", "lender_priority", "expected_reason"),
    [
        (None, 1, "InCohortReclaimWhileBorrowing"),
        (5, 1, "InCohortReclaimWhileBorrowing"),
        (5, 6, None),  # above maxPriorityThreshold
        (None, 10, None),  # not lower than the preemptor
    ],
)
def test_borrow_within_cohort(
    threshold: int | None, lender_priority: int, expected_reason: str | None
) -> None:
    borrow: dict[str, Any] = {"policy": "LowerPriority"}
    if threshold is not None:
        borrow["maxPriorityThreshold"] = threshold
    # b borrows a's 4 cpus; c lends 2 more. a1 needs 5, more than a's nominal: it borrows even
    # once b is back within its own (Kueue takes b's workloads only while b borrows).
    engine = _cohort("LowerPriority", borrow, lender_priority=lender_priority, idle_cpu=2)
    engine.upsert_workload(workload("a1", "lq-a", cpu="5", priority=10, created=100))
    decisions = engine.schedule(T0 + 200)
    if expected_reason is None:
        assert decisions.preemptions == []
    else:
        assert sorted(victims(decisions)) == ["b5", "b6", "b7"]
        assert {p.reason for p in decisions.preemptions} == {expected_reason}


def test_preemptor_admitted_once_victims_release() -> None:
    engine = _cohort("Any")
    engine.upsert_workload(workload("a1", "lq-a", cpu="4", priority=10, created=100))
    decisions = engine.schedule(T0 + 200)
    assert len(decisions.preemptions) == 4
    for p in decisions.preemptions:
        engine.release(*p.victim)
    later = engine.schedule(T0 + 201)
    assert admitted_names(later) == ["a1"]
    assert engine.usage("a") == {("f", "cpu"): 4000}


def _fungible(**fungibility: str) -> Engine:
    """f1: full of lower-priority work (fits only by preemption); f2: fits only by borrowing."""
    engine = load(
        flavor("f1"),
        flavor("f2"),
        cluster_queue(
            "cq",
            quotas({"f1": {"cpu": 2}, "f2": {"cpu": 0}}),
            cohort="team",
            preemption={"withinClusterQueue": "LowerPriority"},
            flavorFungibility=fungibility,
        ),
        cluster_queue("lender", quotas({"f1": {"cpu": 0}, "f2": {"cpu": 4}}), cohort="team"),
        local_queue("lq", "cq"),
    )
    engine.upsert_workload(
        workload("low", priority=1, status=admitted_status("cq", {"cpu": "f1"}, {"cpu": "2"}))
    )
    engine.upsert_workload(workload("high", cpu="2", priority=10, created=10))
    return engine


@pytest.mark.parametrize(
    ("fungibility", "outcome"),
    [
        ({}, "borrow f2"),  # whenCanPreempt TryNextFlavor: a flavor that fits beats preemption
        ({"whenCanPreempt": "MayStopSearch"}, "preempt"),
        (
            {
                "whenCanBorrow": "TryNextFlavor",
                "whenCanPreempt": "TryNextFlavor",
                "preference": "BorrowingOverPreemption",
            },
            "borrow f2",
        ),
        (
            {
                "whenCanBorrow": "TryNextFlavor",
                "whenCanPreempt": "TryNextFlavor",
                "preference": "PreemptionOverBorrowing",
            },
            "preempt",
        ),
    ],
)
def test_flavor_fungibility_between_preempting_and_borrowing(
    fungibility: dict[str, str], outcome: str
) -> None:
    decisions = _fungible(**fungibility).schedule(T0)
    if outcome == "preempt":
        assert victims(decisions) == {"low": "InClusterQueue"}
        assert decisions.reservations == []
    else:
        [reservation] = decisions.reservations
        assert reservation.admission["podSetAssignments"][0]["flavors"] == {"cpu": "f2"}
        assert reservation.borrowing and decisions.preemptions == []


@pytest.mark.parametrize("fair_sharing", [False, True])
def test_a_holder_whose_priority_falls_becomes_a_candidate(fair_sharing: bool) -> None:
    """A running workload's priority changes while it holds quota (its Workload is updated, the
    admission unchanged): preemption sees it at its new priority, in the search and in the
    shortcuts that read the queue's usage by priority."""
    engine = Engine(fair_sharing=fair_sharing)
    engine.upsert(flavor("f"))
    engine.upsert(
        cluster_queue("cq", quotas({"f": {"cpu": 4}}), preemption={"withinClusterQueue": "LowerPriority"})
    )
    engine.upsert(local_queue("lq", "cq"))
    engine.upsert_workload(_running("was-high", "cq", 4, 100, 1))
    engine.upsert_workload(workload("preemptor", cpu="4", priority=50, created=10))
    assert victims(engine.schedule(T0)) == {}  # 100 is not lower than 50
    engine.upsert_workload(_running("was-high", "cq", 4, 10, 1))  # lowered to 10, still running
    assert victims(engine.schedule(T0 + 1)) == {"was-high": "InClusterQueue"}
    engine.release("default", "was-high")
    assert admitted_names(engine.schedule(T0 + 2)) == ["preemptor"]
