"""Workload status transitions, as Kueue writes them (contract §2, §5.7)."""

from __future__ import annotations

from typing import Any

from kadmit import workload as ws

T0 = 1_700_000_000.0


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {
        c["type"]: (c["status"], c["reason"], c["lastTransitionTime"]) for c in status.get("conditions", [])
    }


def test_transition_time_moves_only_when_the_status_flips() -> None:
    status: dict[str, Any] = {}
    assert ws.set_condition(status, "QuotaReserved", "False", "WaitingForQuota", "m1", T0)
    assert not ws.set_condition(status, "QuotaReserved", "False", "WaitingForQuota", "m1", T0 + 5)
    assert ws.set_condition(status, "QuotaReserved", "False", "NoMatchingFlavor", "m2", T0 + 5)
    assert conditions(status)["QuotaReserved"][2] == ws.format_time(T0)
    assert ws.set_condition(status, "QuotaReserved", "True", "QuotaReserved", "m3", T0 + 9)
    assert conditions(status)["QuotaReserved"][2] == ws.format_time(T0 + 9)


def test_reserve_adds_pending_checks_and_keeps_existing_ones() -> None:
    status: dict[str, Any] = {
        "admissionChecks": [{"name": "b", "state": "Ready", "message": "ok"}],
        "resourceRequests": [{"name": "main"}],
    }
    admission = {"clusterQueue": "cq", "podSetAssignments": []}
    cond = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "m"}]
    ws.reserve(status, admission, cond, ["c", "b"], T0)
    assert status["admission"] == admission
    assert [(c["name"], c["state"]) for c in status["admissionChecks"]] == [("b", "Ready"), ("c", "Pending")]
    assert "resourceRequests" not in status
    assert ws.is_true(status, "QuotaReserved")


def test_evict_resets_checks_counts_and_keeps_the_quota() -> None:
    status: dict[str, Any] = {
        "admission": {"clusterQueue": "cq"},
        "clusterName": "w1",
        "admissionChecks": [
            {"name": "a", "state": "Ready", "podSetUpdates": [{"name": "main"}]},
            {"name": "r", "state": "Retry", "retryCount": 2},
            {"name": "p", "state": "Pending", "message": "still"},
        ],
    }
    assert ws.evict(status, "AdmissionCheck", "why", T0)
    assert not ws.evict(status, "AdmissionCheck", "again", T0)  # already evicted
    assert status["admission"] == {"clusterQueue": "cq"}  # quota kept until the job stops
    checks = {c["name"]: c for c in status["admissionChecks"]}
    assert checks["a"]["state"] == "Pending" and "podSetUpdates" not in checks["a"]
    assert checks["a"]["message"] == "Reset to Pending after eviction. Previously: Ready"
    assert checks["r"]["retryCount"] == 3
    assert checks["p"]["message"] == "still"
    assert "clusterName" not in status
    assert status["schedulingStats"]["evictions"] == [
        {"reason": "AdmissionCheck", "underlyingCause": "", "count": 1}
    ]


def test_clear_reservation_requeues_and_accumulates_execution_time() -> None:
    status: dict[str, Any] = {"admission": {"clusterQueue": "cq"}, "accumulatedPastExecutionTimeSeconds": 5}
    ws.set_condition(status, "QuotaReserved", "True", "QuotaReserved", "", T0)
    ws.set_condition(status, "Admitted", "True", "Admitted", "", T0)
    assert ws.clear_reservation(status, T0 + 30, requeued=True, reason="Preempted", message="preempted")
    assert "admission" not in status
    c = conditions(status)
    assert c["QuotaReserved"][:2] == ("False", "PendingEvaluation")
    assert c["Admitted"][:2] == ("False", "NoReservation")
    assert c["Requeued"][:2] == ("True", "Preempted")
    assert status["accumulatedPastExecutionTimeSeconds"] == 35


def test_pods_ready_reasons() -> None:
    status: dict[str, Any] = {}
    ws.set_pods_ready(status, False, T0)
    assert conditions(status)["PodsReady"][:2] == ("False", "WaitForStart")
    ws.set_pods_ready(status, True, T0 + 1)
    assert conditions(status)["PodsReady"][:2] == ("True", "Started")
    assert not ws.set_pods_ready(status, True, T0 + 2)
    ws.set_pods_ready(status, False, T0 + 3)
    assert conditions(status)["PodsReady"][:2] == ("False", "WaitForRecovery")
    ws.set_pods_ready(status, True, T0 + 4)
    assert conditions(status)["PodsReady"][:2] == ("True", "Recovered")


def test_requeue_backoff_doubles_up_to_the_maximum_and_never_moves_earlier() -> None:
    status: dict[str, Any] = {}
    delays = [ws.requeue_after_pods_ready_timeout(status, T0, 60, 200) - T0 for _ in range(4)]
    assert delays == [60, 120, 200, 200]
    assert status["requeueState"]["count"] == 4
    status["requeueState"]["requeueAt"] = ws.format_time(T0 + 10_000)
    assert ws.requeue_after_pods_ready_timeout(status, T0, 60, 200) == T0 + 10_000
