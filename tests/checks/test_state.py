"""The pure rules of the admission-check contract (kueue-contract.md §3)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kadmit.checks.state import new_state, should_evaluate
from kadmit.checks.verdict import Pending, PodSetUpdate, Ready, Rejected, Retry
from kadmit.workload import applicable_checks, format_time, holds_reservation, merge_states, set_condition

T0 = datetime(2026, 11, 23, 8, 0, 0, tzinfo=UTC).timestamp()
T1 = datetime(2026, 11, 23, 8, 5, 0, tzinfo=UTC).timestamp()


def reserved_workload(flavors: dict[str, str] | None = None, **status: object) -> dict[str, object]:
    return {
        "metadata": {"namespace": "ns", "name": "wl"},
        "spec": {"podSets": [{"name": "main", "count": 1}]},
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True"}],
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [{"name": "main", "flavors": flavors or {"cpu": "default"}}],
            },
            **status,
        },
    }


CQ = {
    "metadata": {"name": "cq"},
    "spec": {
        "admissionChecksStrategy": {
            "admissionChecks": [
                {"name": "zeta"},
                {"name": "gpu-only", "onFlavors": ["gpu"]},
                {"name": "alpha", "onFlavors": ["default", "spot"]},
            ]
        }
    },
}


def test_checks_without_on_flavors_apply_to_all_and_on_flavors_needs_an_assigned_flavor() -> None:
    assert applicable_checks(reserved_workload({"cpu": "default"}), CQ) == ["alpha", "zeta"]
    assert applicable_checks(reserved_workload({"cpu": "gpu", "memory": "default"}), CQ) == [
        "alpha", "gpu-only", "zeta"]
    assert applicable_checks(reserved_workload({"cpu": "other"}), CQ) == ["zeta"]


def test_reservation_requires_admission_quota_reserved_and_not_finished_evicted_or_inactive() -> None:
    assert holds_reservation(reserved_workload())
    no_admission = reserved_workload()
    no_admission["status"]["admission"] = None  # type: ignore[index]
    assert not holds_reservation(no_admission)
    for kind in ("Finished", "Evicted"):
        wl = reserved_workload()
        wl["status"]["conditions"].append({"type": kind, "status": "True"})  # type: ignore[index]
        assert not holds_reservation(wl)
    inactive = reserved_workload()
    inactive["spec"]["active"] = False  # type: ignore[index]
    assert not holds_reservation(inactive)


def test_rejected_is_final_and_ready_only_when_the_plugin_asks() -> None:
    assert should_evaluate(None, False)
    assert should_evaluate({"state": "Pending"}, False)
    assert should_evaluate({"state": "Retry"}, False)
    assert not should_evaluate({"state": "Rejected"}, True)
    assert not should_evaluate({"state": "Ready"}, False)
    assert should_evaluate({"state": "Ready"}, True)


def test_transition_time_moves_only_on_a_state_change_and_retry_count_is_kept() -> None:
    first = new_state("c", None, Pending("waiting"), T0)
    assert first == {"name": "c", "state": "Pending", "lastTransitionTime": "2026-11-23T08:00:00Z",
                     "message": "waiting"}
    same = new_state("c", dict(first, retryCount=2), Pending("still waiting"), T1)
    assert same["lastTransitionTime"] == "2026-11-23T08:00:00Z"
    assert same["retryCount"] == 2 and same["message"] == "still waiting"
    ready = new_state("c", same, Ready("ok", (PodSetUpdate("main", annotations={"a": "b"}),)), T1)
    assert ready["state"] == "Ready" and ready["lastTransitionTime"] == "2026-11-23T08:05:00Z"
    assert ready["podSetUpdates"] == [{"name": "main", "annotations": {"a": "b"}}]


def test_retry_sets_requeue_after_in_whole_seconds_rounded_up() -> None:
    entry = new_state("c", None, Retry("short of cpu", after=2.1), T0)
    assert entry["state"] == "Retry" and entry["requeueAfterSeconds"] == 3
    assert "requeueAfterSeconds" not in new_state("c", None, Retry("now"), T0)
    with pytest.raises(ValueError):
        Retry("x", after=-1)
    rejected = new_state("c", entry, Rejected("never"), T1)
    assert rejected["state"] == "Rejected" and rejected["requeueAfterSeconds"] == 3


def test_ready_to_ready_keeps_the_written_pod_set_updates() -> None:
    ready = new_state("c", None, Ready("", (PodSetUpdate("main", labels={"x": "1"}),)), T0)
    again = new_state("c", ready, Ready(""), T1)
    assert again["podSetUpdates"] == [{"name": "main", "labels": {"x": "1"}}]


def test_merge_keeps_other_controllers_entries_and_sorts_by_name() -> None:
    wl = reserved_workload(admissionChecks=[
        {"name": "zeta", "state": "Ready", "message": "theirs"},
        {"name": "alpha", "state": "Pending"},
    ])
    merged = merge_states(wl, [{"name": "alpha", "state": "Retry"}, {"name": "beta", "state": "Pending"}])
    assert [e["name"] for e in merged] == ["alpha", "beta", "zeta"]
    assert merged[0]["state"] == "Retry"
    assert merged[2] == {"name": "zeta", "state": "Ready", "message": "theirs"}


def test_set_condition_reports_no_change_and_moves_time_on_status_change() -> None:
    status: dict[str, object] = {}
    active = ("Active", "True", "Active", "The admission check is active")
    assert set_condition(status, *active, T0, observed_generation=1)
    assert not set_condition(status, *active, T1, observed_generation=1)
    assert set_condition(status, *active, T1, observed_generation=2)  # a newer spec judged: a change
    assert set_condition(status, "Active", "False", "BadParametersRef", "x", T1, observed_generation=2)
    [stored] = status["conditions"]  # type: ignore[attr-defined]
    assert stored["lastTransitionTime"] == format_time(T1) and stored["observedGeneration"] == 2
