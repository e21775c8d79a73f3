"""Admission checks (contract §3): Ready → Admitted, Retry → evict and requeue, Rejected → deactivate."""

from __future__ import annotations

from typing import Any

import pytest

from kadmit.engine import Engine
from kadmit.engine.timestamps import format_time
from tests.engine.conftest import (
    API,
    T0,
    admitted_names,
    cluster_queue,
    flavor,
    load,
    local_queue,
    quotas,
    workload,
)


def _check(name: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {"controllerName": "example.com/check"},
        "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Active"}]},
    }


def _engine(rules: list[dict[str, Any]]) -> Engine:
    return load(
        flavor("f1"),
        flavor("f2"),
        _check("a"),
        _check("b"),
        cluster_queue(
            "cq",
            quotas({"f1": {"cpu": 1}, "f2": {"cpu": 4}}),
            admissionChecksStrategy={"admissionChecks": rules},
        ),
        local_queue("lq", "cq"),
    )


@pytest.mark.parametrize(
    ("cpu", "expected_checks"),
    [
        ("1", ["a"]),  # f1 assigned: b applies only on f2
        ("2", ["a", "b"]),  # f2 assigned
    ],
)
def test_on_flavors_selects_the_checks(cpu: str, expected_checks: list[str]) -> None:
    engine = _engine([{"name": "a"}, {"name": "b", "onFlavors": ["f2"]}])
    engine.upsert_workload(workload("w", cpu=cpu))
    [reservation] = engine.schedule(T0).reservations
    assert reservation.admission_checks == expected_checks
    assert not reservation.admitted
    assert "Admitted" not in {c["type"] for c in reservation.conditions}


def _states(**states: tuple[str, int | None]) -> list[dict[str, Any]]:
    out = []
    for name, (state, after) in states.items():
        entry: dict[str, Any] = {
            "name": name,
            "state": state,
            "message": f"{name} says {state}",
            "lastTransitionTime": format_time(T0 + 10),
        }
        if after is not None:
            entry["requeueAfterSeconds"] = after
        out.append(entry)
    return out


def test_admitted_only_when_every_check_is_ready() -> None:
    engine = _engine([{"name": "a"}, {"name": "b"}])
    engine.upsert_workload(workload("w"))
    engine.schedule(T0)
    engine.set_check_states("default", "w", _states(a=("Ready", None), b=("Pending", None)))
    assert engine.schedule(T0 + 1).admitted == []
    engine.set_check_states("default", "w", _states(a=("Ready", None), b=("Ready", None)))
    decisions = engine.schedule(T0 + 2)
    assert [a.workload for a in decisions.admitted] == [("default", "w")]
    assert decisions.admitted[0].conditions[0]["reason"] == "Admitted"
    assert engine.schedule(T0 + 3).admitted == []  # said once


def test_retry_evicts_and_requeues_after_the_backoff() -> None:
    engine = _engine([{"name": "a"}, {"name": "b"}])
    engine.upsert_workload(workload("w"))
    engine.schedule(T0)
    engine.set_check_states("default", "w", _states(a=("Retry", 30), b=("Retry", 60)))
    decisions = engine.schedule(T0 + 11)
    [eviction] = decisions.evictions
    assert eviction.reason == "AdmissionCheck"
    assert (
        eviction.message
        == 'Evicted due to AdmissionChecks in Retry state: "a" (a says Retry); "b" (b says Retry)'
    )
    assert eviction.requeue_at == T0 + 70  # max over Retry checks of lastTransitionTime + requeueAfterSeconds
    assert engine.usage("cq") != {}  # quota is held until the job stops
    engine.release("default", "w", now=T0 + 12, requeue_at=eviction.requeue_at)
    assert engine.usage("cq") == {}
    assert engine.schedule(T0 + 69).reservations == []  # still backing off
    later = engine.schedule(T0 + 70)
    assert [r.workload for r in later.requeues] == [("default", "w")]
    assert admitted_names(later) == ["w"]


def test_rejected_deactivates() -> None:
    engine = _engine([{"name": "a"}])
    engine.upsert_workload(workload("w"))
    engine.schedule(T0)
    engine.set_check_states("default", "w", _states(a=("Rejected", None)))
    [deactivation] = engine.schedule(T0 + 1).deactivations
    assert deactivation.message == 'AdmissionCheck in Rejected state: "a" (a says Rejected)'
    assert deactivation.conditions[0]["type"] == "DeactivationTarget"
    # The controller sets spec.active=false; the engine releases the quota and keeps it out.
    obj = workload("w")
    obj["spec"]["active"] = False
    engine.upsert_workload(obj)
    assert engine.usage("cq") == {}
    assert engine.schedule(T0 + 2).reservations == []


def test_check_states_arrive_through_workload_status_too() -> None:
    engine = _engine([{"name": "a"}])
    engine.upsert_workload(workload("w"))
    [reservation] = engine.schedule(T0).reservations
    status = {
        "admission": reservation.admission,
        "conditions": reservation.conditions,
        "admissionChecks": _states(a=("Ready", None)),
    }
    engine.upsert_workload(workload("w", status=status))
    assert [a.workload for a in engine.schedule(T0 + 1).admitted] == [("default", "w")]
