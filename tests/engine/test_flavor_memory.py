"""The flavor walk's memory (contract §5.3 step 3, Kueue's ``LastTriedFlavorIdx``).

"The walk resumes right after the flavor where the workload's previous attempt stopped; it is
reset to -1, i.e. start from the first flavor, once the last flavor has been tried. That memory
is discarded when the workload's scheduling shape changed, or when the remembered attempt is
older than the preceding cycle and the CQ's allocatable-resource generation advanced."
"""

from __future__ import annotations

from typing import Any

from kadmit.engine import Engine, parse
from kadmit.engine.flavors import FIT, PREEMPT, FlavorAssigner
from tests.engine.conftest import (
    admitted_names,
    admitted_status,
    cluster_queue,
    flavor,
    load,
    local_queue,
    quotas,
    two_flavors_full_of_low_priority_work,
    workload,
)

THREE = {"a": {"cpu": 2}, "b": {"cpu": 2}, "c": {"cpu": 2}}


def _engine(fungibility: dict[str, str] | None = None, **spec: Any) -> Engine:
    if fungibility:
        spec["flavorFungibility"] = fungibility
    return load(
        flavor("a"),
        flavor("b"),
        flavor("c"),
        cluster_queue("cq", quotas(THREE), **spec),
        local_queue("lq", "cq"),
    )


def _assigner(engine: Engine) -> FlavorAssigner:
    engine.sync()
    return engine._assigners["cq"]


def _pod_sets(cpu: str = "1") -> Any:
    return parse.workload(workload("w", cpu=cpu)).pod_sets


def test_a_walk_resumes_right_after_the_flavor_where_the_previous_one_stopped() -> None:
    assigner = _assigner(_engine())
    first = assigner.assign(_pod_sets(), [1])
    assert (first.mode, first.pod_sets[0].flavors) == (FIT, {"cpu": "a"})
    assert first.last_tried == [{"cpu": 0}]  # stopped at a, which is not the last flavor
    resumed = assigner.assign(_pod_sets(), [1], first.last_tried)
    assert resumed.pod_sets[0].flavors == {"cpu": "b"}
    assert resumed.last_tried == [{"cpu": 1}]
    after_b = assigner.assign(_pod_sets(), [1], resumed.last_tried)
    assert after_b.pod_sets[0].flavors == {"cpu": "c"}
    assert after_b.last_tried == [{"cpu": -1}]  # the last flavor was tried: start over next time
    again = assigner.assign(_pod_sets(), [1], after_b.last_tried)
    assert again.pod_sets[0].flavors == {"cpu": "a"}


def test_a_walk_that_goes_through_every_flavor_is_remembered_as_minus_one() -> None:
    engine = _engine()
    for name in ("a", "b"):
        status = admitted_status("cq", {"cpu": name}, {"cpu": "2"})
        engine.upsert(workload(f"on-{name}", cpu="2", status=status))
    assignment = _assigner(engine).assign(_pod_sets(), [1])
    assert assignment.pod_sets[0].flavors == {"cpu": "c"}
    assert assignment.last_tried == [{"cpu": -1}]


def test_a_walk_that_finds_nothing_leaves_no_memory() -> None:
    assignment = _assigner(_engine()).assign(_pod_sets(cpu="3"), [1])
    assert assignment.mode < PREEMPT
    assert assignment.last_tried == [{}]  # next time from the first flavor


def _preempting_engine() -> Engine:
    """Both flavors full of low-priority work, and a high-priority workload to place."""
    engine = two_flavors_full_of_low_priority_work()
    engine.upsert(workload("high", cpu="2", priority=10, created=1.0))
    return engine


def test_memory_is_dropped_once_the_attempt_is_old_and_quota_was_given_back() -> None:
    engine = _preempting_engine()
    first = engine.schedule(1.0)
    assert [p.victim[1] for p in first.preemptions] == ["low-a"]
    assert engine._entries[("default", "high")].walk is not None
    assert engine.schedule(2.0).preemptions == []  # waiting for its victim
    engine.release("default", "low-a")  # quota given back: the generation advances
    third = engine.schedule(3.0)
    # The attempt of cycle 1 is older than the preceding cycle: the walk starts at a again,
    # which now fits, instead of resuming at b and preempting low-b.
    assert admitted_names(third) == ["high"]
    assert third.reservations[0].admission["podSetAssignments"][0]["flavors"] == {"cpu": "a"}
    assert third.preemptions == []


def test_memory_from_the_preceding_cycle_is_kept() -> None:
    engine = _preempting_engine()
    engine.schedule(1.0)
    engine.release("default", "low-a")
    second = engine.schedule(2.0)
    # Kueue resumes after a (where cycle 1 stopped): b needs preemption and the search stops.
    assert admitted_names(second) == []
    assert [p.victim[1] for p in second.preemptions] == ["low-b"]


def test_memory_is_dropped_when_the_scheduling_shape_changes() -> None:
    engine = _preempting_engine()
    engine.schedule(1.0)
    assert engine._entries[("default", "high")].walk is not None
    engine.upsert(workload("high", cpu="1", priority=10, created=1.0))
    assert engine._entries[("default", "high")].walk is None


def test_memory_is_dropped_on_admission() -> None:
    engine = _engine()
    engine.upsert(workload("w"))
    decisions = engine.schedule(1.0)
    assert admitted_names(decisions) == ["w"]
    assert engine._entries[("default", "w")].walk is None
