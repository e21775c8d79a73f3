"""The batch/v1 Job integration and Kueue's Workload construction for it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kadmit.controller.jobs.construct import (
    Priority,
    PriorityClassNotFound,
    construct_workload,
    equivalent,
    resolve_priority,
    workload_name,
)
from kadmit.controller.jobs.integration import STOPPING_ANNOTATION
from kadmit.controller.jobs.job_integration import BatchJobIntegration
from kadmit.controller.jobs.podtemplate import PodSetInfo

JOB = BatchJobIntegration()


def job(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "sample", "namespace": "default", "uid": "uid-1",
                     "labels": {"kueue.x-k8s.io/queue-name": "user-queue", "team": "a"},
                     "annotations": {"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "600", "other": "x"}},
        "spec": {"parallelism": 3, "completions": 3, "suspend": True,
                 "template": {"metadata": {"labels": {"app": "x", "controller-uid": "u", "job-name": "sample",
                                                      "batch.kubernetes.io/job-name": "sample"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox",
                                                       "resources": {"requests": {"cpu": "1"}}}],
                                       "restartPolicy": "Never"}}},
    }
    base["spec"].update(spec)
    return base


def test_workload_name_is_kueues() -> None:
    assert workload_name("Job", "batch", "name", "uid") == "job-name-ef3a1"
    long = workload_name("Job", "batch", "x" * 300, "uid")
    assert len(long) == 253 and long.startswith("job-xxx")


def test_workload_for_a_job() -> None:
    wl = construct_workload(JOB, job(), Priority(0), label_keys_to_copy=["team", "absent"])
    assert wl["metadata"]["name"] == workload_name("Job", "batch", "sample", "uid-1")
    assert wl["metadata"]["namespace"] == "default"
    assert wl["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": "uid-1", "team": "a"}
    assert wl["metadata"]["annotations"] == {"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "600"}
    assert wl["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    assert wl["metadata"]["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job", "name": "sample",
                                                  "uid": "uid-1", "controller": True,
                                                  "blockOwnerDeletion": True}]
    assert wl["spec"]["queueName"] == "user-queue"
    [ps] = wl["spec"]["podSets"]
    assert ps["name"] == "main" and ps["count"] == 3
    # legacy job-controller labels are dropped from the Workload's copy, batch.kubernetes.io/job-name kept
    assert ps["template"]["metadata"]["labels"] == {"app": "x", "batch.kubernetes.io/job-name": "sample"}
    assert "priority" not in wl["spec"]
    assert wl["metadata"]["ownerReferences"][0]["uid"] == job()["metadata"]["uid"]


def test_counts_min_count_priority_and_max_exec_time() -> None:
    j = job(parallelism=5, completions=2)
    j["metadata"]["annotations"]["kueue.x-k8s.io/job-min-parallelism"] = "1"
    j["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = "60"
    wl = construct_workload(JOB, j, Priority(100, "kueue.x-k8s.io", "WorkloadPriorityClass", "high"))
    assert wl["spec"]["podSets"][0]["count"] == 2
    assert wl["spec"]["podSets"][0]["minCount"] == 1
    assert wl["spec"]["maximumExecutionTimeSeconds"] == 60
    assert wl["spec"]["priority"] == 100
    assert wl["spec"]["priorityClassRef"] == {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                              "name": "high"}
    no_completions = job(parallelism=4)
    del no_completions["spec"]["completions"]
    assert JOB.pod_sets(no_completions)[0]["count"] == 4


def test_priority_resolution_order() -> None:
    wpcs = {"high": {"value": 1000}}
    pcs = {"pc-mid": {"metadata": {"name": "pc-mid"}, "value": 50},
           "pc-default": {"metadata": {"name": "pc-default"}, "value": 7, "globalDefault": True},
           "pc-default-2": {"metadata": {"name": "pc-default-2"}, "value": 3, "globalDefault": True}}

    def resolve(j: dict[str, Any]) -> Priority:
        return resolve_priority(j, JOB.pod_sets(j), wpcs.get, pcs.get, lambda: list(pcs.values()))

    j = job()
    j["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
    assert resolve(j) == Priority(1000, "kueue.x-k8s.io", "WorkloadPriorityClass", "high")
    j = job()
    j["spec"]["template"]["spec"]["priorityClassName"] = "pc-mid"
    assert resolve(j) == Priority(50, "scheduling.k8s.io", "PriorityClass", "pc-mid")
    assert resolve(job()) == Priority(3, "scheduling.k8s.io", "PriorityClass", "pc-default-2")
    assert resolve_priority(job(), [], wpcs.get, pcs.get, list) == Priority(0)
    j = job()
    j["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "absent"
    with pytest.raises(PriorityClassNotFound, match="WorkloadPriorityClass absent not found"):
        resolve(j)


def test_equivalence_ignores_api_server_defaults_but_not_size() -> None:
    wl = construct_workload(JOB, job(), Priority(0))
    stored = copy.deepcopy(wl)
    stored["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "Always"
    assert equivalent(stored, wl)
    assert not equivalent(stored, construct_workload(JOB, job(parallelism=2), Priority(0)))
    other_image = job()
    other_image["spec"]["template"]["spec"]["containers"][0]["image"] = "alpine"
    assert not equivalent(stored, construct_workload(JOB, other_image, Priority(0)))


def test_start_then_stop_round_trip() -> None:
    j = job()
    j["metadata"]["annotations"]["kueue.x-k8s.io/job-min-parallelism"] = "1"
    pod_sets = JOB.pod_sets(j)
    started = JOB.run_with_pod_set_infos(j, [PodSetInfo("main", 2, labels={"kueue.x-k8s.io/podset": "main"},
                                                        node_selector={"instance-type": "spot"})])
    assert started["spec"]["suspend"] is False
    assert started["spec"]["parallelism"] == 2  # partial admission
    assert started["spec"]["template"]["spec"]["nodeSelector"] == {"instance-type": "spot"}
    assert j["spec"]["suspend"] is True  # input untouched
    started["status"] = {"startTime": "2026-01-01T00:00:00Z", "active": 2}
    assert not JOB.is_suspended(started)
    stopping = JOB.suspended(started)
    assert stopping["spec"]["suspend"] is True
    assert stopping["metadata"]["annotations"][STOPPING_ANNOTATION] == "true"
    assert not JOB.is_suspended(stopping)  # still stopping
    assert JOB.status_after_stop(stopping) == {"status": {"startTime": None}}
    restored = JOB.restored(stopping, pod_sets)
    assert JOB.is_suspended(restored)
    assert STOPPING_ANNOTATION not in restored["metadata"]["annotations"]
    assert "nodeSelector" not in restored["spec"]["template"]["spec"]
    assert restored["spec"]["parallelism"] == 3
    # the job controller's labels keep their current values
    assert restored["spec"]["template"]["metadata"]["labels"]["controller-uid"] == "u"
    with pytest.raises(ValueError, match="pod set 'other'"):
        JOB.run_with_pod_set_infos(j, [PodSetInfo("other", 1)])


def test_finished_active_ready_and_reclaimable() -> None:
    j = job()
    assert JOB.finished(j) is None
    j["status"] = {"conditions": [{"type": "Complete", "status": "True", "message": "done"}]}
    finished = JOB.finished(j)
    assert finished is not None and (finished.reason, finished.message) == ("Succeeded", "done")
    j["status"] = {"conditions": [{"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"}]}
    failed = JOB.finished(j)
    assert failed is not None and failed.reason == "Failed"
    j["status"] = {"active": 3, "ready": 2, "succeeded": 0}
    assert JOB.is_active(j) and not JOB.pods_ready(j)
    j["status"] = {"active": 2, "ready": 2, "succeeded": 1}
    assert JOB.pods_ready(j)
    # 3 completions, 1 succeeded: 2 remain for a parallelism of 3, so one pod's quota is reclaimable
    assert JOB.reclaimable_pods(j) == [{"name": "main", "count": 1}]
    j["status"] = {"active": 3}
    assert JOB.reclaimable_pods(j) == []
    j2 = job(parallelism=3, completions=4)
    j2["status"] = {"succeeded": 2}
    assert JOB.reclaimable_pods(j2) == [{"name": "main", "count": 1}]
    j3 = job(parallelism=2, completions=4, completionMode="Indexed")
    j3["status"] = {"completedIndexes": "0-2", "failedIndexes": "3"}
    assert JOB.reclaimable_pods(j3) == [{"name": "main", "count": 2}]
