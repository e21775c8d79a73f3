"""Workload slices of elastic jobs scaled up (Kueue's ``ElasticJobsViaWorkloadSlices``): the new
slice is admitted when the delta over the slice it replaces fits, on that slice's flavors; the
old slice's quota is released when the new one is admitted (and given back if that admission is
not written)."""

from __future__ import annotations

from typing import Any

from kadmit.engine import Engine
from kadmit.engine.timestamps import format_time
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

REPLACES = "kueue.x-k8s.io/workload-slice-replacement-for"


def _running(name: str, count: int, flavor_name: str = "f", cq: str = "cq") -> dict[str, Any]:
    """An admitted Workload of ``count`` one-cpu pods on ``flavor_name``."""
    status = admitted_status(cq, {"cpu": flavor_name}, {"cpu": str(count)}, count=count)
    return workload(name, count=count, cpu="1", status=status)


def _slice(name: str, count: int, replaces: str, created: float = 10.0) -> dict[str, Any]:
    wl = workload(name, count=count, cpu="1", created=created)
    wl["metadata"]["annotations"] = {REPLACES: f"default/{replaces}"}
    return wl


def _engine(*groups: dict[str, Any]) -> Engine:
    return load(flavor("f"), flavor("g"), cluster_queue("cq", list(groups)), local_queue("lq", "cq"))


def _finished(obj: dict[str, Any]) -> dict[str, Any]:
    obj["status"]["conditions"].append(
        {
            "type": "Finished",
            "status": "True",
            "reason": "WorkloadSliceReplaced",
            "message": "",
            "lastTransitionTime": format_time(T0 + 20),
        }
    )
    return obj


def test_a_slice_is_admitted_when_the_delta_fits() -> None:
    engine = _engine(*quotas({"f": {"cpu": 4}}))
    engine.upsert_workload(_running("old", 2))
    engine.upsert_workload(_running("other", 1))
    engine.upsert_workload(_slice("new", 3, "old"))  # 3 cpu in all, 1 more than "old": 1 is free

    [reservation] = engine.schedule(T0 + 10).reservations
    assert reservation.workload == ("default", "new")
    assert reservation.replaced == ("default", "old")
    assert reservation.admission["podSetAssignments"] == [
        {"name": "main", "flavors": {"cpu": "f"}, "resourceUsage": {"cpu": "3"}, "count": 3}
    ]
    # the old slice's 2 cpu are released, the new one's 3 charged: 1 (other) + 3
    assert engine.usage("cq") == {("f", "cpu"): 4000}

    # the controller's writes come back: the new slice reserved, the old one finished
    written = _slice("new", 3, "old")
    written["status"] = admitted_status("cq", {"cpu": "f"}, {"cpu": "3"}, count=3, at=10)
    engine.upsert_workload(written)
    engine.upsert_workload(_finished(_running("old", 2)))
    assert engine.usage("cq") == {("f", "cpu"): 4000}
    assert not engine.schedule(T0 + 11).reservations


def test_a_slice_whose_delta_does_not_fit_waits_and_the_old_slice_keeps_its_quota() -> None:
    engine = _engine(*quotas({"f": {"cpu": 4}}))
    engine.upsert_workload(_running("old", 2))
    engine.upsert_workload(_running("other", 1))
    engine.upsert_workload(_slice("new", 4, "old"))  # 2 more needed, 1 free

    decisions = engine.schedule(T0 + 10)
    assert admitted_names(decisions) == []
    assert pending_by_name(decisions)["new"] == (
        "WaitingForQuota",
        "couldn't assign flavors to pod set main: "
        "insufficient unused quota for cpu in flavor f, 1 more needed",
    )
    assert engine.usage("cq") == {("f", "cpu"): 3000}

    engine.upsert_workload(_finished(_running("other", 1)))  # 1 cpu freed: the delta fits now
    [reservation] = engine.schedule(T0 + 12).reservations
    assert reservation.workload == ("default", "new") and reservation.replaced == ("default", "old")
    assert engine.usage("cq") == {("f", "cpu"): 4000}


def test_the_replaced_slice_is_not_counted_twice_and_comes_back_if_the_admission_is_not_written() -> None:
    engine = _engine(*quotas({"f": {"cpu": 4}}))
    engine.upsert_workload(_running("old", 3))
    engine.upsert_workload(_slice("new", 4, "old"))
    engine.upsert_workload(workload("waiting", count=1, cpu="1", created=20))

    decisions = engine.schedule(T0 + 10)
    # A whole new 4-cpu Workload would not fit beside the old 3: the slice needs 1 more.
    assert admitted_names(decisions) == ["new"]
    assert engine.usage("cq") == {("f", "cpu"): 4000}
    assert "waiting" in pending_by_name(decisions)

    engine.forget("default", "new")  # its status write failed: the old slice holds its 3 cpu again
    assert engine.usage("cq") == {("f", "cpu"): 3000}
    decisions = engine.schedule(T0 + 11)
    assert admitted_names(decisions) == ["new"]
    assert engine.usage("cq") == {("f", "cpu"): 4000}


def test_a_slice_keeps_the_flavors_of_the_slice_it_replaces() -> None:
    # f first: a new 4-cpu Workload would go to f; the old slice runs on g, so the new one does too.
    engine = _engine(*quotas({"f": {"cpu": 4}, "g": {"cpu": 6}}))
    engine.upsert_workload(_running("old", 2, flavor_name="g"))
    engine.upsert_workload(_slice("new", 4, "old"))
    [reservation] = engine.schedule(T0 + 10).reservations
    assert reservation.admission["podSetAssignments"][0]["flavors"] == {"cpu": "g"}
    assert engine.usage("cq") == {("g", "cpu"): 4000}

    # On g, 6 cpu: scaling to 7 would need 3 more where 2 are free, and never moves to f.
    engine = _engine(*quotas({"f": {"cpu": 8}, "g": {"cpu": 6}}))
    engine.upsert_workload(_running("old", 4, flavor_name="g"))
    engine.upsert_workload(_running("other", 1, flavor_name="g"))
    engine.upsert_workload(_slice("new", 7, "old"))
    decisions = engine.schedule(T0 + 10)
    assert admitted_names(decisions) == []
    assert pending_by_name(decisions)["new"][1].endswith(
        "insufficient unused quota for cpu in flavor g, 2 more needed"
    )


def test_a_slice_whose_old_slice_holds_no_quota_is_scheduled_as_any_workload() -> None:
    engine = _engine(*quotas({"f": {"cpu": 4}}))
    engine.upsert_workload(_slice("new", 3, "gone"))
    [reservation] = engine.schedule(T0 + 10).reservations
    assert reservation.replaced is None
    assert engine.usage("cq") == {("f", "cpu"): 3000}


def test_a_slice_preempts_lower_priority_workloads_for_its_delta_never_the_slice_it_replaces() -> None:
    groups = quotas({"f": {"cpu": 4}})
    engine = load(
        flavor("f"),
        cluster_queue("cq", groups, preemption={"withinClusterQueue": "LowerOrNewerEqualPriority"}),
        local_queue("lq", "cq"),
    )
    old = _running("old", 2)
    old["spec"]["priority"] = 100
    engine.upsert_workload(old)
    low = _running("low", 2)
    low["spec"]["priority"] = 1
    engine.upsert_workload(low)
    new = _slice("new", 3, "old")  # 1 more needed, none free: "low" makes room
    new["spec"]["priority"] = 100
    engine.upsert_workload(new)

    decisions = engine.schedule(T0 + 10)
    assert [p.victim for p in decisions.preemptions] == [("default", "low")]
    assert admitted_names(decisions) == []

    engine.release("default", "low", T0 + 11)  # its job stopped
    [reservation] = engine.schedule(T0 + 12).reservations
    assert reservation.workload == ("default", "new") and reservation.replaced == ("default", "old")
    assert engine.usage("cq") == {("f", "cpu"): 3000}


def test_a_slice_with_nothing_to_preempt_waits() -> None:
    groups = quotas({"f": {"cpu": 4}})
    engine = load(
        flavor("f"),
        cluster_queue("cq", groups, preemption={"withinClusterQueue": "LowerOrNewerEqualPriority"}),
        local_queue("lq", "cq"),
    )
    engine.upsert_workload(_running("old", 4))  # the only holder: the slice it replaces
    new = _slice("new", 5, "old")
    new["spec"]["priority"] = 100  # (its job's priority class changed): "old" would be a candidate
    engine.upsert_workload(new)
    decisions = engine.schedule(T0 + 10)
    assert decisions.preemptions == [] and admitted_names(decisions) == []
    assert pending_by_name(decisions)["new"][0] == "WaitingForQuota"
    assert engine.usage("cq") == {("f", "cpu"): 4000}
