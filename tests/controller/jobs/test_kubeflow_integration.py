"""The Kubeflow integration (one module for the six kinds): pod sets per replica type in Kueue's
order, suspend in ``spec.runPolicy``, start/stop and exact restore, state from the operator's
status, and the priority class Kueue reads."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kadmit.controller.config import Configuration
from kadmit.controller.jobs.construct import Priority, construct_workload, resolve_priority, workload_name
from kadmit.controller.jobs.kubeflow import KubeflowIntegration
from kadmit.controller.jobs.podtemplate import PodSetInfo
from kadmit.controller.manager import integrations_for
from kadmit.webhook.kubeflow import BY_FRAMEWORK, JAX_JOB, KUBEFLOW_KINDS, MPI_JOB, PYTORCH_JOB, TF_JOB

PYTORCH = KubeflowIntegration(PYTORCH_JOB)
TF = KubeflowIntegration(TF_JOB)


def replica(replicas: int | None = None, priority_class: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    out: dict[str, Any] = {"template": {"metadata": {"labels": {"app": "train"}}, "spec": spec}}
    if replicas is not None:
        out["replicas"] = replicas
    return out


def job(field: str, specs: dict[str, Any], kind: str = "PyTorchJob", version: str = "v1") -> dict[str, Any]:
    return {
        "apiVersion": f"kubeflow.org/{version}",
        "kind": kind,
        "metadata": {
            "name": "train",
            "namespace": "default",
            "uid": "u",
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
        },
        "spec": {"runPolicy": {"suspend": True}, field: specs},
    }


def test_frameworks_and_resources() -> None:
    frameworks = [k.framework for k in KUBEFLOW_KINDS]
    assert frameworks == [
        "kubeflow.org/pytorchjob",
        "kubeflow.org/tfjob",
        "kubeflow.org/xgboostjob",
        "kubeflow.org/paddlejob",
        "kubeflow.org/jaxjob",
        "kubeflow.org/mpijob",
    ]
    found = integrations_for(Configuration(frameworks=("batch/job", *frameworks)))
    kinds = [(i.framework, i.resource.api_version, i.resource.plural) for i in found[1:]]
    assert kinds[0] == ("kubeflow.org/pytorchjob", "kubeflow.org/v1", "pytorchjobs")
    assert kinds[-1] == ("kubeflow.org/mpijob", "kubeflow.org/v2beta1", "mpijobs")
    assert all(isinstance(i, KubeflowIntegration) for i in found[1:])


def test_pod_sets_follow_kueues_order_and_lower_case_names() -> None:
    # the map's order does not matter: Kueue's OrderedReplicaTypes does
    tf = job(
        "tfReplicaSpecs",
        {"Worker": replica(3), "Evaluator": replica(), "Chief": replica(1), "PS": replica(2)},
    )
    assert [(p["name"], p["count"]) for p in TF.pod_sets(tf)] == [
        ("chief", 1),
        ("ps", 2),
        ("worker", 3),
        ("evaluator", 1),
    ]
    pt = job("pytorchReplicaSpecs", {"Worker": replica(4), "Master": replica()})
    assert [(p["name"], p["count"]) for p in PYTORCH.pod_sets(pt)] == [("master", 1), ("worker", 4)]
    mpi = KubeflowIntegration(MPI_JOB)
    m = job("mpiReplicaSpecs", {"Worker": replica(2), "Launcher": replica(1)}, "MPIJob", "v2beta1")
    assert [p["name"] for p in mpi.pod_sets(m)] == ["launcher", "worker"]
    jax = KubeflowIntegration(JAX_JOB)
    assert [p["name"] for p in jax.pod_sets(job("jaxReplicaSpecs", {"Worker": replica(2)}, "JAXJob"))] == [
        "worker"
    ]
    # an unknown replica type is not a pod set (Kueue ignores it too)
    assert [p["name"] for p in PYTORCH.pod_sets(job("pytorchReplicaSpecs", {"Launcher": replica()}))] == []


def test_workload_name_and_owner() -> None:
    pt = job("pytorchReplicaSpecs", {"Master": replica(), "Worker": replica(2)})
    wl = construct_workload(PYTORCH, pt, Priority(0))
    assert wl["metadata"]["name"] == workload_name("PyTorchJob", "kubeflow.org", "train", "u")
    assert wl["metadata"]["name"].startswith("pytorchjob-train-")
    assert wl["metadata"]["ownerReferences"][0]["apiVersion"] == "kubeflow.org/v1"
    assert wl["spec"]["queueName"] == "lq"


def test_suspend_lives_in_run_policy_and_restore_is_exact() -> None:
    pt = job("pytorchReplicaSpecs", {"Master": replica(), "Worker": replica(2)})
    original = copy.deepcopy(pt)
    assert PYTORCH.is_suspended(pt)
    started = PYTORCH.run_with_pod_set_infos(
        pt,
        [
            PodSetInfo("master", 1, node_selector={"pool": "cpu"}),
            PodSetInfo(
                "worker", 2, node_selector={"pool": "gpu"}, tolerations=[{"key": "gpu", "operator": "Exists"}]
            ),
        ],
    )
    assert started["spec"]["runPolicy"]["suspend"] is False and "suspend" not in started["spec"]
    assert not PYTORCH.is_suspended(started)
    specs = started["spec"]["pytorchReplicaSpecs"]
    assert specs["Master"]["template"]["spec"]["nodeSelector"] == {"pool": "cpu"}
    assert specs["Worker"]["template"]["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    stopping = PYTORCH.suspended(started)
    assert stopping["spec"]["runPolicy"]["suspend"] is True
    assert not PYTORCH.is_suspended(stopping)  # still stopping (annotation) until restored
    assert PYTORCH.suspend_flag(stopping)
    restored = PYTORCH.restored(stopping, PYTORCH.pod_sets(original))
    assert restored == original
    with pytest.raises(ValueError, match="'launcher' is not in the PyTorchJob"):
        PYTORCH.run_with_pod_set_infos(pt, [PodSetInfo("launcher", 1)])


def test_a_job_without_run_policy_is_not_suspended_and_gets_one() -> None:
    pt = job("pytorchReplicaSpecs", {"Worker": replica(2)})
    del pt["spec"]["runPolicy"]
    assert not PYTORCH.is_suspended(pt) and not PYTORCH.suspend_flag(pt)
    assert PYTORCH.suspended(pt)["spec"]["runPolicy"] == {"suspend": True}


def test_state_from_the_operators_status() -> None:
    pt = job("pytorchReplicaSpecs", {"Master": replica(), "Worker": replica(2)})
    assert not PYTORCH.is_active(pt) and not PYTORCH.pods_ready(pt) and PYTORCH.finished(pt) is None
    pt["status"] = {
        "conditions": [
            {"type": "Created", "status": "True"},
            {"type": "Running", "status": "True", "reason": "PyTorchJobRunning"},
        ],
        "replicaStatuses": {"Master": {"active": 1}, "Worker": {"succeeded": 1}},
    }
    assert PYTORCH.is_active(pt) and PYTORCH.pods_ready(pt) and PYTORCH.finished(pt) is None
    pt["status"] = {
        "conditions": [
            {"type": "Running", "status": "False"},
            {
                "type": "Succeeded",
                "status": "True",
                "message": "PyTorchJob default/train successfully completed.",
            },
        ],
        "replicaStatuses": {"Master": {"succeeded": 1}, "Worker": {}},
    }
    finished = PYTORCH.finished(pt)
    assert finished is not None and finished.reason == "Succeeded"
    assert finished.message == "PyTorchJob default/train successfully completed."
    assert not PYTORCH.is_active(pt) and not PYTORCH.pods_ready(pt)
    pt["status"]["conditions"] = [
        {"type": "Failed", "status": "True", "message": "1 Worker replica(s) failed"}
    ]
    assert PYTORCH.finished(pt) is not None and PYTORCH.finished(pt).reason == "Failed"  # type: ignore[union-attr]


def test_priority_class_as_kueue_reads_it() -> None:
    classes = {"low": {"value": 10}, "high": {"value": 1000}, "mid": {"value": 100}}
    pt = job("pytorchReplicaSpecs", {"Master": replica(), "Worker": replica(2, priority_class="mid")})

    def priority(obj: dict[str, Any]) -> Priority:
        pod_sets = PYTORCH.pod_sets(obj)
        return resolve_priority(
            obj, pod_sets, lambda n: None, classes.get, lambda: [], PYTORCH.priority_class(obj)
        )

    assert priority(pt).name == "mid"  # the first replica type naming one, not just the first pod set
    pt["spec"]["runPolicy"]["schedulingPolicy"] = {"priorityClass": "high"}
    assert priority(pt) == Priority(1000, "scheduling.k8s.io", "PriorityClass", "high")
    assert priority(job("pytorchReplicaSpecs", {"Worker": replica()})) == Priority(0)


def test_every_framework_is_in_the_table() -> None:
    assert set(BY_FRAMEWORK) == {k.framework for k in KUBEFLOW_KINDS}
