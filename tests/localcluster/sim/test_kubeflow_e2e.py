"""The Kubeflow jobs on the local API server, without kadmit: the simulated operator alone.

The CRDs are installed after the cluster (and its controllers) started, as ``kadmit local`` does,
so every test also shows the operator picking the APIs up late. It names and labels Pods as the
Training Operator does, honours ``runPolicy.suspend`` and ``runPolicy.managedBy``, reports
conditions and ``replicaStatuses``, fails a job whose ``Never`` replica failed, and cleans up
after ``cleanPodPolicy``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client as k8s

from kadmit.localcluster.sim.kubeflow import (
    JOB_NAME_LABEL,
    JOB_ROLE_LABEL,
    OPERATOR_NAME_LABEL,
    REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL,
)

from .conftest import Obj, condition, has_true, wait_for

THIRD_PARTY = Path(__file__).resolve().parents[3] / "manifests" / "third-party"
GROUP = "kubeflow.org"
MERGE = "application/merge-patch+json"


@pytest.fixture
async def kubeflow(api_client: k8s.ApiClient) -> AsyncIterator[k8s.CustomObjectsApi]:
    crds = k8s.ApiextensionsV1Api(api_client)
    for plural in ("pytorchjobs", "mpijobs"):
        await crds.create_custom_resource_definition(
            yaml.safe_load((THIRD_PARTY / f"kubeflow.org_{plural}.yaml").read_text())
        )
    yield k8s.CustomObjectsApi(api_client)


def replica(replicas: int, runtime: str = "100ms", restart: str = "Never", **annotations: str) -> Obj:
    return {
        "replicas": replicas,
        "restartPolicy": restart,
        "template": {
            "metadata": {"annotations": {"localcluster.kadmit.dev/runtime": runtime, **annotations}},
            "spec": {
                "containers": [
                    {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "250m"}}}
                ]
            },
        },
    }


def pytorchjob(name: str, run_policy: Obj | None = None, **specs: Obj) -> Obj:
    spec: Obj = {"pytorchReplicaSpecs": specs}
    if run_policy is not None:
        spec["runPolicy"] = run_policy
    return {"apiVersion": f"{GROUP}/v1", "kind": "PyTorchJob", "metadata": {"name": name}, "spec": spec}


async def until(api: k8s.CustomObjectsApi, plural: str, name: str, check: Any, within: float = 10) -> Obj:
    version = "v2beta1" if plural == "mpijobs" else "v1"
    return await wait_for(
        api.list_namespaced_custom_object,
        check,
        within,
        group=GROUP,
        version=version,
        namespace="default",
        plural=plural,
        field_selector=f"metadata.name={name}",
    )


async def pods_of(core: k8s.CoreV1Api, name: str) -> list[Obj]:
    listed = await core.list_namespaced_pod("default", label_selector=f"{JOB_NAME_LABEL}={name}")
    return sorted(
        (core.api_client.sanitize_for_serialization(p) for p in listed.items),
        key=lambda p: p["metadata"]["name"],
    )


async def test_pods_named_and_labelled_as_the_operator_does_and_the_job_succeeds(
    kubeflow: k8s.CustomObjectsApi, core: k8s.CoreV1Api
) -> None:
    await kubeflow.create_namespaced_custom_object(
        GROUP, "v1", "default", "pytorchjobs", pytorchjob("train", Master=replica(1), Worker=replica(2))
    )
    done = await until(kubeflow, "pytorchjobs", "train", has_true("Succeeded"))
    assert [c["type"] for c in done["status"]["conditions"]] == ["Created", "Running", "Succeeded"]
    assert condition(done, "Created")["reason"] == "PyTorchJobCreated"  # type: ignore[index]
    assert condition(done, "Running")["status"] == "False"  # type: ignore[index]
    assert condition(done, "Succeeded")["message"] == "PyTorchJob default/train successfully completed."  # type: ignore[index]
    assert done["status"]["replicaStatuses"]["Master"]["succeeded"] == 1
    assert done["status"]["replicaStatuses"]["Master"]["selector"] == (
        "training.kubeflow.org/job-name=train,training.kubeflow.org/operator-name=pytorchjob-controller,"
        "training.kubeflow.org/replica-type=master"
    )
    assert "startTime" in done["status"] and "completionTime" in done["status"]
    pods = await pods_of(core, "train")
    assert [p["metadata"]["name"] for p in pods] == ["train-master-0", "train-worker-0", "train-worker-1"]
    master = pods[0]["metadata"]["labels"]
    assert master[OPERATOR_NAME_LABEL] == "pytorchjob-controller"
    assert (master[REPLICA_TYPE_LABEL], master[REPLICA_INDEX_LABEL], master[JOB_ROLE_LABEL]) == (
        "master",
        "0",
        "master",
    )
    assert JOB_ROLE_LABEL not in pods[2]["metadata"]["labels"]
    assert pods[2]["metadata"]["labels"][REPLICA_INDEX_LABEL] == "1"
    assert pods[0]["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob"
    assert all(p["spec"]["restartPolicy"] == "Never" for p in pods)


async def test_suspend_deletes_the_pods_and_resume_makes_them_again(
    kubeflow: k8s.CustomObjectsApi, core: k8s.CoreV1Api
) -> None:
    await kubeflow.create_namespaced_custom_object(
        GROUP, "v1", "default", "pytorchjobs", pytorchjob("long", Worker=replica(2, runtime="30s"))
    )
    await until(kubeflow, "pytorchjobs", "long", has_true("Running"))
    await kubeflow.patch_namespaced_custom_object(
        GROUP,
        "v1",
        "default",
        "pytorchjobs",
        "long",
        {"spec": {"runPolicy": {"suspend": True}}},
        _content_type=MERGE,
    )
    suspended = await until(kubeflow, "pytorchjobs", "long", has_true("Suspended"))
    assert condition(suspended, "Suspended")["reason"] == "PyTorchJobSuspended"  # type: ignore[index]
    assert condition(suspended, "Suspended")["message"] == "PyTorchJob long is suspended."  # type: ignore[index]
    assert condition(suspended, "Running")["status"] == "False"  # type: ignore[index]
    assert "startTime" not in suspended["status"]
    for _ in range(100):
        if not await pods_of(core, "long"):
            break
        await asyncio.sleep(0.1)
    assert await pods_of(core, "long") == []
    await kubeflow.patch_namespaced_custom_object(
        GROUP,
        "v1",
        "default",
        "pytorchjobs",
        "long",
        {"spec": {"runPolicy": {"suspend": False}}},
        _content_type=MERGE,
    )

    def resumed(obj: Obj) -> bool:
        found = condition(obj, "Suspended")
        return found is not None and found["status"] == "False" and has_true("Running")(obj)

    again = await until(kubeflow, "pytorchjobs", "long", resumed)
    assert condition(again, "Suspended")["reason"] == "PyTorchJobResumed"  # type: ignore[index]
    assert [p["metadata"]["name"] for p in await pods_of(core, "long")] == ["long-worker-0", "long-worker-1"]


async def test_a_job_managed_by_another_controller_is_left_alone(
    kubeflow: k8s.CustomObjectsApi, core: k8s.CoreV1Api
) -> None:
    other = pytorchjob("elsewhere", {"managedBy": "kueue.x-k8s.io/multikueue"}, Worker=replica(1))
    await kubeflow.create_namespaced_custom_object(GROUP, "v1", "default", "pytorchjobs", other)
    own = pytorchjob("here", {"managedBy": "kubeflow.org/training-operator"}, Worker=replica(1))
    await kubeflow.create_namespaced_custom_object(GROUP, "v1", "default", "pytorchjobs", own)
    await until(kubeflow, "pytorchjobs", "here", has_true("Succeeded"))
    job = await kubeflow.get_namespaced_custom_object(GROUP, "v1", "default", "pytorchjobs", "elsewhere")
    assert not job.get("status") and await pods_of(core, "elsewhere") == []


async def test_a_failed_never_replica_fails_the_job_and_clean_pod_policy_all_deletes_the_rest(
    kubeflow: k8s.CustomObjectsApi, core: k8s.CoreV1Api
) -> None:
    body = pytorchjob(
        "broken",
        {"cleanPodPolicy": "All"},
        Master=replica(1, **{"localcluster.kadmit.dev/exit-code": "3"}),
        Worker=replica(1, runtime="30s"),
    )
    await kubeflow.create_namespaced_custom_object(GROUP, "v1", "default", "pytorchjobs", body)
    failed = await until(kubeflow, "pytorchjobs", "broken", has_true("Failed"))
    assert condition(failed, "Failed")["reason"] == "PyTorchJobFailed"  # type: ignore[index]
    assert condition(failed, "Failed")["message"] == (  # type: ignore[index]
        "PyTorchJob broken is failed because 1 Master replica(s) failed."
    )
    for _ in range(100):
        if not await pods_of(core, "broken"):
            break
        await asyncio.sleep(0.1)
    assert await pods_of(core, "broken") == []


async def test_an_mpijob_runs_its_launcher_and_workers(
    kubeflow: k8s.CustomObjectsApi, core: k8s.CoreV1Api
) -> None:
    body = {
        "apiVersion": f"{GROUP}/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "mpi"},
        "spec": {"mpiReplicaSpecs": {"Launcher": replica(1), "Worker": replica(2)}},
    }
    await kubeflow.create_namespaced_custom_object(GROUP, "v2beta1", "default", "mpijobs", body)
    done = await until(kubeflow, "mpijobs", "mpi", has_true("Succeeded"))
    assert condition(done, "Created")["reason"] == "MPIJobCreated"  # type: ignore[index]
    pods = await pods_of(core, "mpi")
    assert [p["metadata"]["name"] for p in pods] == ["mpi-launcher", "mpi-worker-0", "mpi-worker-1"]
    assert pods[0]["metadata"]["labels"][OPERATOR_NAME_LABEL] == "mpi-operator"
    assert pods[0]["metadata"]["labels"][REPLICA_TYPE_LABEL] == "launcher"
