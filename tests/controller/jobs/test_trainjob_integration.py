"""The TrainJob integration: pod sets from the JobSet the Trainer builds out of the runtime,
start through Kueue's runtime patch, exact restore, state from the Trainer's status."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kadmit.controller.jobs.construct import Priority, construct_workload, workload_name
from kadmit.controller.jobs.podtemplate import PodSetInfo
from kadmit.controller.jobs.trainjob import RuntimeNotFound, TrainJobIntegration, child_jobset
from kadmit.kube import Resource
from kadmit.kube.resources import CLUSTER_TRAINING_RUNTIMES, TRAINING_RUNTIMES
from kadmit.webhook.trainjob import kueue_runtime_patch


def runtime(name: str = "torch") -> dict[str, Any]:
    def rj(name: str, step: str, cpu: str) -> dict[str, Any]:
        return {
            "name": name,
            "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": step}},
                "spec": {
                    "template": {
                        "metadata": {"labels": {"app": name}},
                        "spec": {
                            "containers": [
                                {
                                    "name": "node" if step == "trainer" else step,
                                    "image": "img",
                                    "resources": {"requests": {"cpu": cpu}},
                                }
                            ]
                        },
                    }
                },
            },
        }

    return {
        "metadata": {"name": name},
        "spec": {
            "mlPolicy": {"numNodes": 3},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        rj("model-initializer", "model-initializer", "1"),
                        rj("node", "trainer", "2"),
                    ]
                }
            },
        },
    }


def trainjob(**trainer: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": "tj",
            "namespace": "ns",
            "uid": "u",
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
        },
        "spec": {
            "runtimeRef": {"name": "torch"},
            "suspend": True,
            "trainer": trainer,
            "runtimePatches": [kueue_runtime_patch()],
        },
    }


def bound(objects: dict[tuple[Resource, str | None, str], dict[str, Any]]) -> TrainJobIntegration:
    integration = TrainJobIntegration()
    integration.bind(lambda resource, namespace, name: objects.get((resource, namespace, name)))
    return integration


TJ = bound({(CLUSTER_TRAINING_RUNTIMES, None, "torch"): runtime()})


def test_pod_sets_come_from_the_runtime_and_the_trainer_settings() -> None:
    assert [(p["name"], p["count"]) for p in TJ.pod_sets(trainjob())] == [
        ("model-initializer", 1),
        ("node", 3),
    ]
    job = trainjob(numNodes=2, image="mine", resourcesPerNode={"requests": {"cpu": "4"}})
    sets = TJ.pod_sets(job)
    assert [(p["name"], p["count"]) for p in sets] == [("model-initializer", 1), ("node", 2)]
    (container,) = sets[1]["template"]["spec"]["containers"]
    assert container["image"] == "mine" and container["resources"] == {"requests": {"cpu": "4"}}
    wl = construct_workload(TJ, job, Priority(0))
    assert wl["metadata"]["name"] == workload_name("TrainJob", "trainer.kubeflow.org", "tj", "u")


def test_a_namespaced_runtime_and_a_missing_one() -> None:
    namespaced = bound({(TRAINING_RUNTIMES, "ns", "local"): runtime("local")})
    job = trainjob()
    job["spec"]["runtimeRef"] = {
        "name": "local",
        "kind": "TrainingRuntime",
        "apiGroup": "trainer.kubeflow.org",
    }
    assert [p["name"] for p in namespaced.pod_sets(job)] == ["model-initializer", "node"]
    with pytest.raises(RuntimeNotFound, match="runtime 'torch' not found"):
        namespaced.pod_sets(trainjob())
    assert not namespaced.pods_ready(trainjob())


def test_start_writes_the_kueue_patch_and_stop_restores_exactly() -> None:
    job = trainjob(numNodes=2)
    original = copy.deepcopy(job)
    started = TJ.run_with_pod_set_infos(
        job,
        [
            PodSetInfo("model-initializer", 1, node_selector={"pool": "cpu"}),
            PodSetInfo(
                "node",
                2,
                labels={"kueue.x-k8s.io/podset": "node"},
                node_selector={"pool": "gpu"},
                tolerations=[{"key": "gpu", "operator": "Exists"}],
            ),
        ],
    )
    assert started["spec"]["suspend"] is False and not TJ.is_suspended(started)
    (patch,) = started["spec"]["runtimePatches"]
    assert patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][1] == {
        "name": "node",
        "template": {
            "spec": {
                "template": {
                    "metadata": {"labels": {"kueue.x-k8s.io/podset": "node"}},
                    "spec": {
                        "nodeSelector": {"pool": "gpu"},
                        "tolerations": [{"key": "gpu", "operator": "Exists"}],
                    },
                }
            }
        },
    }
    # the JobSet the Trainer makes now carries it (and keeps the runtime's own labels)
    jobset = child_jobset(started, runtime())
    node = jobset["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]
    assert node["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert node["metadata"]["labels"] == {"app": "node", "kueue.x-k8s.io/podset": "node"}
    restored = TJ.restored(TJ.suspended(started), TJ.pod_sets(original))
    assert restored == original
    with pytest.raises(ValueError, match="'launcher' is not in the TrainJob's runtime"):
        TJ.run_with_pod_set_infos(job, [PodSetInfo("launcher", 1)])


def test_a_trainjob_without_kueues_patch_gets_one_on_start() -> None:
    job = trainjob()
    del job["spec"]["runtimePatches"]
    started = TJ.run_with_pod_set_infos(job, [PodSetInfo("node", 3, node_selector={"pool": "cpu"})])
    assert [p["manager"] for p in started["spec"]["runtimePatches"]] == ["kueue.x-k8s.io/manager"]


def test_state_from_the_trainers_status() -> None:
    job = trainjob()
    assert not TJ.is_active(job) and TJ.finished(job) is None and not TJ.pods_ready(job)
    job["status"] = {
        "jobsStatus": [
            {"name": "model-initializer", "active": 0, "succeeded": 1},
            {"name": "node", "active": 1, "ready": 1},
        ]
    }
    assert TJ.is_active(job) and TJ.pods_ready(job)  # one replica each: both ready or done
    assert TJ.reclaimable_pods(job) == [{"name": "model-initializer", "count": 1}]
    job["status"]["conditions"] = [
        {
            "type": "Complete",
            "status": "True",
            "reason": "AllJobsCompleted",
            "message": "jobset completed successfully",
        }
    ]
    finished = TJ.finished(job)
    assert (
        finished is not None
        and finished.reason == "Succeeded"
        and finished.message == "jobset completed successfully"
    )
    job["status"]["conditions"] = [{"type": "Failed", "status": "True", "message": "boom"}]
    assert TJ.finished(job) is not None and TJ.finished(job).reason == "Failed"  # type: ignore[union-attr]
