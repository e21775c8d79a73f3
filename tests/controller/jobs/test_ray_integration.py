"""The KubeRay integrations' pure functions: pod sets as Kueue builds them, start and exact restore,
state from status; and the webhooks' Kueue rules with Kueue's messages."""

from __future__ import annotations

import copy
from typing import Any

from kadmit.controller.jobs.construct import Priority, construct_workload
from kadmit.controller.jobs.podtemplate import PodSetInfo
from kadmit.controller.jobs.ray import RayClusterIntegration, RayJobIntegration
from kadmit.webhook.fielderrors import aggregate
from kadmit.webhook.ray import validate_raycluster_create, validate_rayjob_create

RAYJOB = RayJobIntegration()
RAYCLUSTER = RayClusterIntegration()


def container(cpu: str) -> dict[str, Any]:
    return {"name": "ray", "image": "ray:2", "resources": {"requests": {"cpu": cpu}}}


def cluster_spec() -> dict[str, Any]:
    return {
        "headGroupSpec": {"template": {"spec": {"containers": [container("1")]}}},
        "workerGroupSpecs": [
            {
                "groupName": "small",
                "template": {"spec": {"containers": [container("1")]}},
            },  # replicas unset: 1
            {
                "groupName": "tpu",
                "replicas": 2,
                "numOfHosts": 4,
                "minReplicas": 0,
                "template": {"metadata": {"labels": {"x": "y"}}, "spec": {"containers": [container("2")]}},
            },
        ],
    }


def rayjob(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": "rj",
            "namespace": "default",
            "uid": "u",
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
        },
        "spec": {"suspend": True, "shutdownAfterJobFinishes": True, "rayClusterSpec": cluster_spec(), **spec},
    }


def counts(pod_sets: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(p["name"], p["count"]) for p in pod_sets]


def test_cluster_pod_sets_count_replicas_times_hosts() -> None:
    cluster = {"metadata": {"name": "c", "uid": "u"}, "spec": cluster_spec()}
    assert counts(RAYCLUSTER.pod_sets(cluster)) == [("head", 1), ("small", 1), ("tpu", 8)]
    wl = construct_workload(RAYCLUSTER, cluster, Priority(0))
    assert wl["metadata"]["name"].startswith("raycluster-c-")
    assert wl["metadata"]["ownerReferences"][0]["apiVersion"] == "ray.io/v1"


def test_rayjob_pod_sets_per_submission_mode() -> None:
    default = RAYJOB.pod_sets(rayjob())  # K8sJobMode, the CRD's default: KubeRay's default submitter
    assert counts(default) == [("head", 1), ("small", 1), ("tpu", 8), ("submitter", 1)]
    submitter = default[-1]["template"]["spec"]
    assert submitter["containers"][0]["name"] == "ray-job-submitter"
    assert submitter["containers"][0]["image"] == "ray:2"  # the head's image
    assert submitter["containers"][0]["resources"]["requests"] == {"cpu": "500m", "memory": "200Mi"}
    assert submitter["restartPolicy"] == "Never"
    http = RAYJOB.pod_sets(rayjob(submissionMode="HTTPMode"))
    assert counts(http) == [("head", 1), ("small", 1), ("tpu", 8)]
    sidecar = RAYJOB.pod_sets(rayjob(submissionMode="SidecarMode"))
    assert [c["name"] for c in sidecar[0]["template"]["spec"]["containers"]] == ["ray", "ray-job-submitter"]


def test_head_accounts_for_autoscaler_and_redis_cleanup() -> None:
    job = rayjob()
    job["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
    job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "100m", "memory": "1Gi"}
    }
    job["metadata"]["annotations"] = {"ray.io/ft-enabled": "true"}
    head = RAYJOB.pod_sets(job)[0]["template"]["spec"]["containers"]
    assert head[0]["resources"]["requests"] == {"cpu": "200m", "memory": "1Gi"}  # max with 200m / 256Mi
    assert head[1] == {
        "name": "autoscaler",
        "resources": {
            "limits": {"cpu": "500m", "memory": "512Mi"},
            "requests": {"cpu": "500m", "memory": "512Mi"},
        },
    }


def test_start_injects_every_pod_set_and_restore_is_exact() -> None:
    job = rayjob()
    original = copy.deepcopy(job)
    pod_sets = RAYJOB.pod_sets(job)
    infos = [
        PodSetInfo(
            p["name"],
            p["count"],
            labels={"kueue.x-k8s.io/podset": p["name"]},
            node_selector={"pool": p["name"]},
        )
        for p in pod_sets
    ]
    started = RAYJOB.run_with_pod_set_infos(job, infos)
    assert job == original  # pure
    assert started["spec"]["suspend"] is False
    spec = started["spec"]
    assert spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["nodeSelector"] == {"pool": "head"}
    assert spec["rayClusterSpec"]["workerGroupSpecs"][1]["template"]["metadata"]["labels"] == {
        "x": "y",
        "kueue.x-k8s.io/podset": "tpu",
    }
    # the default submitter template is written into the RayJob with its flavor, as Kueue does
    assert spec["submitterPodTemplate"]["spec"]["nodeSelector"] == {"pool": "submitter"}
    restored = RAYJOB.restored(RAYJOB.suspended(started), pod_sets)
    assert restored["spec"]["rayClusterSpec"] == original["spec"]["rayClusterSpec"]
    assert "nodeSelector" not in restored["spec"]["submitterPodTemplate"]["spec"]
    assert restored["metadata"] == original["metadata"] and restored["spec"]["suspend"] is True
    # stopped before it ever started: KubeRay's default submitter template is not written in
    never_started = RAYJOB.restored(RAYJOB.suspended(job), pod_sets)
    assert never_started == original


def test_state_from_status() -> None:
    job = rayjob()
    assert not RAYJOB.is_active(job) and RAYJOB.finished(job) is None and not RAYJOB.pods_ready(job)
    job["status"] = {"jobDeploymentStatus": "Running", "rayClusterStatus": {"state": "ready"}}
    assert RAYJOB.is_active(job) and RAYJOB.pods_ready(job)
    job["status"] = {"jobDeploymentStatus": "Suspended"}
    assert not RAYJOB.is_active(job)
    job["status"] = {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "message": "done"}
    finished = RAYJOB.finished(job)
    assert finished is not None and (finished.reason, finished.message) == ("Succeeded", "done")
    job["status"] = {"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "message": "boom"}
    finished = RAYJOB.finished(job)
    assert finished is not None and (finished.reason, finished.message) == ("Failed", "boom")
    assert RAYJOB.skip(rayjob(clusterSelector={"ray.io/cluster": "shared"}))
    cluster = {"metadata": {"name": "c"}, "spec": cluster_spec(), "status": {"state": "ready"}}
    assert (
        RAYCLUSTER.is_active(cluster)
        and RAYCLUSTER.pods_ready(cluster)
        and RAYCLUSTER.finished(cluster) is None
    )


def test_webhook_rules_and_messages() -> None:
    assert validate_rayjob_create(rayjob(), managed=True) == []
    selector = rayjob(clusterSelector={"ray.io/cluster": "shared"})
    assert aggregate(validate_rayjob_create(selector, managed=True)) == (
        'spec.clusterSelector: Invalid value: {"ray.io/cluster":"shared"}: '
        "a kueue managed job should not use an existing cluster"
    )
    no_cluster = rayjob()
    del no_cluster["spec"]["rayClusterSpec"]
    assert aggregate(validate_rayjob_create(no_cluster, managed=True)) == (
        "spec.rayClusterSpec: Required value: rayClusterSpec is required for Kueue-managed jobs that "
        "don't use clusterSelector"
    )
    unmanaged = rayjob(shutdownAfterJobFinishes=False)
    assert validate_rayjob_create(unmanaged, managed=False) == []  # no queue: not Kueue's rules
    many = {
        "metadata": {"name": "c"},
        "spec": {"headGroupSpec": {}, "workerGroupSpecs": [{"groupName": f"g{i}"} for i in range(18)]},
    }
    assert aggregate(validate_raycluster_create(many, managed=True)) == (
        "spec.workerGroupSpecs: Too many: 19: must have at most 18 items"
    )
    elastic = {
        "metadata": {"name": "c", "annotations": {"kueue.x-k8s.io/elastic-job": "true"}},
        "spec": {"enableInTreeAutoscaling": True, "headGroupSpec": {}, "workerGroupSpecs": []},
    }
    assert aggregate(validate_raycluster_create(elastic, managed=True)) == (
        "spec.headGroupSpec.template.spec.schedulingGates: Invalid value: null: an elastic job must have the "
        "ElasticJobSchedulingGate"
    )
