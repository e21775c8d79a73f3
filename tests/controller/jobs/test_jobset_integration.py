"""The JobSet integration: pod sets per replicated job, start/stop through the same interface."""

from __future__ import annotations

from typing import Any

from kadmit.controller.jobs.construct import Priority, construct_workload, workload_name
from kadmit.controller.jobs.jobset_integration import JobSetIntegration
from kadmit.controller.jobs.podtemplate import PodSetInfo

JOBSET = JobSetIntegration()


def jobset() -> dict[str, Any]:
    def rj(name: str, replicas: int | None, parallelism: int, completions: int | None) -> dict[str, Any]:
        spec: dict[str, Any] = {"parallelism": parallelism,
                                "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}
        if completions is not None:
            spec["completions"] = completions
        out: dict[str, Any] = {"name": name, "template": {"spec": spec}}
        if replicas is not None:
            out["replicas"] = replicas
        return out

    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "js", "namespace": "default", "uid": "u",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"suspend": True, "replicatedJobs": [rj("leader", None, 1, 1), rj("workers", 2, 3, 2)]}}


def test_pod_sets_and_workload() -> None:
    js = jobset()
    assert [(p["name"], p["count"]) for p in JOBSET.pod_sets(js)] == [("leader", 1), ("workers", 4)]
    wl = construct_workload(JOBSET, js, Priority(0))
    assert wl["metadata"]["name"] == workload_name("JobSet", "jobset.x-k8s.io", "js", "u")
    assert wl["metadata"]["name"].startswith("jobset-js-")
    assert wl["metadata"]["ownerReferences"][0]["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    assert wl["spec"]["queueName"] == "lq"


def test_start_injects_per_replicated_job_and_stop_restores() -> None:
    js = jobset()
    started = JOBSET.run_with_pod_set_infos(js, [
        PodSetInfo("leader", 1, node_selector={"pool": "cpu"}),
        PodSetInfo("workers", 4, node_selector={"pool": "gpu"},
                   tolerations=[{"key": "gpu", "operator": "Exists"}])])
    assert started["spec"]["suspend"] is False
    templates = JOBSET.templates(started)
    assert templates["leader"]["spec"]["nodeSelector"] == {"pool": "cpu"}
    assert templates["workers"]["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    restored = JOBSET.restored(JOBSET.suspended(started), JOBSET.pod_sets(js))
    assert JOBSET.is_suspended(restored)
    assert all("nodeSelector" not in t["spec"] for t in JOBSET.templates(restored).values())


def test_state() -> None:
    js = jobset()
    assert not JOBSET.pods_ready(js) and not JOBSET.is_active(js) and JOBSET.finished(js) is None
    js["status"] = {"replicatedJobsStatus": [{"name": "leader", "ready": 1, "active": 1},
                                              {"name": "workers", "ready": 1, "succeeded": 0, "active": 2}]}
    assert JOBSET.is_active(js) and not JOBSET.pods_ready(js)
    js["status"]["replicatedJobsStatus"][1]["succeeded"] = 1
    assert JOBSET.pods_ready(js)
    js["status"]["conditions"] = [{"type": "Completed", "status": "True", "message": "ok"}]
    finished = JOBSET.finished(js)
    assert finished is not None and finished.reason == "Succeeded"
