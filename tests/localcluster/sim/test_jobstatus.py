"""The Job controller's decisions, one rule at a time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from kadmit.localcluster.conditions import find
from kadmit.localcluster.objects import Obj
from kadmit.localcluster.sim.jobstatus import COMPLETION_INDEX, compress_indexes, plan
from kadmit.localcluster.timestamps import format_time

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def job(**spec: Any) -> Obj:
    return {"metadata": {"name": "j", "namespace": "ns"}, "spec": spec, "status": {}}


def pod(name: str, phase: str = "Running", ready: bool = True, index: int | None = None) -> Obj:
    annotations = {COMPLETION_INDEX: str(index)} if index is not None else {}
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {
        "metadata": {"name": name, "annotations": annotations, "creationTimestamp": name},
        "status": {"phase": phase, "conditions": conditions},
    }


def test_new_job_gets_parallelism_pods_and_a_start_time() -> None:
    result = plan(job(parallelism=3, completions=5), [], NOW)
    assert result.create == [None, None, None]
    assert result.status["startTime"] == format_time(NOW)
    assert result.status["ready"] == 0


def test_completions_cap_the_pods_still_needed() -> None:
    pods = [pod("a", "Succeeded"), pod("b", "Succeeded"), pod("c", "Succeeded"), pod("d")]
    result = plan(job(parallelism=3, completions=5), pods, NOW)
    assert result.create == [None]  # 5 - 3 done = 2 needed, 1 running
    assert result.status["active"] == 1 and result.status["ready"] == 1 and result.status["succeeded"] == 3


def test_completion_writes_success_criteria_met_then_complete() -> None:
    result = plan(job(parallelism=2, completions=2), [pod("a", "Succeeded"), pod("b", "Succeeded")], NOW)
    types = [c["type"] for c in result.status["conditions"]]
    assert types == ["SuccessCriteriaMet", "Complete"]
    assert find(result.status, "Complete")["reason"] == "CompletionsReached"  # type: ignore[index]
    assert result.status["completionTime"] == format_time(NOW)
    assert result.create == [] and "active" not in result.status


def test_work_queue_job_completes_when_one_succeeds_and_none_run() -> None:
    spec = {"parallelism": 2}
    still_running = plan(job(**spec), [pod("a", "Succeeded"), pod("b")], NOW)
    assert still_running.create == [] and find(still_running.status, "Complete") is None
    done = plan(job(**spec), [pod("a", "Succeeded"), pod("b", "Succeeded")], NOW)
    assert find(done.status, "Complete") is not None


def test_indexed_job_fills_missing_indexes_lowest_first() -> None:
    pods = [pod("a", "Succeeded", index=0), pod("b", index=2), pod("c", "Failed", index=1)]
    result = plan(job(parallelism=3, completions=5, completionMode="Indexed"), pods, NOW)
    assert result.create == [1, 3]
    assert result.status["completedIndexes"] == "0"
    assert result.status["failed"] == 1


def test_indexed_job_drops_duplicate_index_pods() -> None:
    pods = [pod("a", index=0), pod("b", index=0)]
    result = plan(job(parallelism=2, completions=2, completionMode="Indexed"), pods, NOW)
    assert [p["metadata"]["name"] for p in result.delete] == ["b"]
    assert result.create == [1]


def test_suspending_deletes_active_pods_and_resets_start_time() -> None:
    running = job(parallelism=2, completions=2, suspend=True)
    running["status"] = {"startTime": format_time(NOW - timedelta(minutes=1)), "active": 2}
    result = plan(running, [pod("a"), pod("b", "Succeeded")], NOW)
    assert [p["metadata"]["name"] for p in result.delete] == ["a"]
    assert "startTime" not in result.status and "active" not in result.status
    suspended = find(result.status, "Suspended")
    assert suspended is not None and suspended["status"] == "True" and suspended["reason"] == "JobSuspended"
    assert result.create == []


def test_resuming_flips_suspended_to_false() -> None:
    resumed = job(parallelism=1, completions=1, suspend=False)
    resumed["status"] = {"conditions": [{"type": "Suspended", "status": "True", "reason": "JobSuspended",
                                         "lastTransitionTime": "x"}]}
    result = plan(resumed, [], NOW)
    suspended = find(result.status, "Suspended")
    assert suspended is not None and suspended["status"] == "False" and suspended["reason"] == "JobResumed"
    assert suspended["lastTransitionTime"] == format_time(NOW)
    assert result.create == [None]


def test_backoff_limit_fails_the_job() -> None:
    failures = [pod(f"f{i}", "Failed") for i in range(2)]
    within = plan(job(completions=1, backoffLimit=2), failures, NOW)
    assert find(within.status, "Failed") is None and within.create == [None]
    over = plan(job(completions=1, backoffLimit=1), [*failures, pod("r")], NOW)
    failed = find(over.status, "Failed")
    assert failed is not None and failed["reason"] == "BackoffLimitExceeded"
    assert [c["type"] for c in over.status["conditions"]] == ["FailureTarget", "Failed"]
    assert [p["metadata"]["name"] for p in over.delete] == ["r"] and over.create == []
    assert "completionTime" not in over.status


def test_active_deadline_fails_and_is_rechecked_before() -> None:
    started = job(completions=1, activeDeadlineSeconds=30)
    started["status"] = {"startTime": format_time(NOW - timedelta(seconds=10))}
    early = plan(started, [pod("a")], NOW)
    assert early.recheck_after == 20
    late = plan(started, [pod("a")], NOW + timedelta(seconds=25))
    failed = find(late.status, "Failed")
    assert failed is not None and failed["reason"] == "DeadlineExceeded"


def test_finished_job_starts_nothing() -> None:
    done = job(completions=3)
    done["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    assert plan(done, [], NOW).create == []


def test_lower_parallelism_deletes_the_newest_extra_pods() -> None:
    result = plan(job(parallelism=1, completions=4), [pod("a"), pod("b")], NOW)
    assert [p["metadata"]["name"] for p in result.delete] == ["b"]


def test_completed_indexes_are_compressed() -> None:
    assert compress_indexes({0, 1, 2, 4, 6, 7}) == "0-2,4,6-7"
    assert compress_indexes(set()) == ""
