"""The Kubeflow jobs go the way a Job does, on ``kadmit local``'s cluster: each Training Operator
kind (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob) and MPIJob is suspended by kadmit's
webhook (``spec.runPolicy.suspend``), gets one Workload with a pod set per replica type, is
admitted with the flavor injected into every replica template, run by the local cluster's
simulated operator (Pods named and labelled as upstream's) and finished when the operator says
``Succeeded``; a running one is preempted by a higher-priority Job, suspended (Pods gone),
restored exactly, re-admitted and run again.

The ``kadmit`` fixture is ``kadmit local`` in-process (same CRDs, RBAC, webhooks and
configuration), which manages the Kubeflow kinds because the local cluster serves them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kadmit.controller import local_setup
from kadmit.controller.apply import Applier, load_documents
from kadmit.kube import ApiError, Resource
from kadmit.kube.resources import (
    JAX_JOBS,
    JOBS,
    MPI_JOBS,
    PADDLE_JOBS,
    PODS,
    PYTORCH_JOBS,
    TF_JOBS,
    WORKLOADS,
    XGBOOST_JOBS,
)
from tests.e2e.conftest import MANIFESTS, WebhookEnv, eventually
from tests.e2e.helpers import apply_small_setup, condition_of, job, quota_released

Obj = dict[str, Any]
POOL = {"kadmit.dev/pool": "cpu"}


def template(cpu: str, runtime: str) -> Obj:
    return {
        "metadata": {"annotations": {"localcluster.kadmit.dev/runtime": runtime}},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}},
                }
            ]
        },
    }


# (resource, replica-spec field, [(replica type, replicas)]): two replica types where the kind has them
KINDS: dict[str, tuple[Resource, str, list[tuple[str, int]]]] = {
    "PyTorchJob": (PYTORCH_JOBS, "pytorchReplicaSpecs", [("Master", 1), ("Worker", 2)]),
    "TFJob": (TF_JOBS, "tfReplicaSpecs", [("Chief", 1), ("Worker", 2)]),
    "XGBoostJob": (XGBOOST_JOBS, "xgbReplicaSpecs", [("Master", 1), ("Worker", 2)]),
    "PaddleJob": (PADDLE_JOBS, "paddleReplicaSpecs", [("Master", 1), ("Worker", 2)]),
    "JAXJob": (JAX_JOBS, "jaxReplicaSpecs", [("Worker", 3)]),
    "MPIJob": (MPI_JOBS, "mpiReplicaSpecs", [("Launcher", 1), ("Worker", 2)]),
}


def kubeflow_job(
    kind: str,
    name: str,
    *,
    cpu: str = "500m",
    runtime: str = "200ms",
    queue: str = "small",
    priority_class: str | None = None,
) -> Obj:
    resource, field, replicas = KINDS[kind]
    labels = {"kueue.x-k8s.io/queue-name": queue}
    if priority_class:
        labels["kueue.x-k8s.io/priority-class"] = priority_class
    specs = {
        replica_type: {"replicas": count, "restartPolicy": "Never", "template": template(cpu, runtime)}
        for replica_type, count in replicas
    }
    return {
        "apiVersion": resource.api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {field: specs},
    }


def true(obj: Obj, kind: str) -> bool:
    condition = condition_of(obj, kind)
    return condition is not None and condition["status"] == "True"


async def workload_of(kube: Any, kind: str, name: str) -> Obj | None:
    for wl in (await kube.list(WORKLOADS, "default"))["items"]:
        if wl["metadata"]["name"].startswith(f"{kind.lower()}-{name}-"):
            return wl  # type: ignore[no-any-return]
    return None


def pod_names(kind: str, name: str) -> list[str]:
    _, _, replicas = KINDS[kind]
    names = []
    for replica_type, count in replicas:
        for index in range(count):
            launcher = kind == "MPIJob" and replica_type == "Launcher"
            names.append(f"{name}-launcher" if launcher else f"{name}-{replica_type.lower()}-{index}")
    return sorted(names)


@pytest.mark.parametrize("kind", list(KINDS))
async def test_queued_admitted_with_flavors_and_run_to_completion(kadmit: WebhookEnv, kind: str) -> None:
    kube = kadmit.kube
    resource, field, replicas = KINDS[kind]
    await apply_small_setup(kube)
    created = await kube.create(resource, kubeflow_job(kind, "train"))
    assert created["spec"]["runPolicy"]["suspend"] is True  # by the mutating webhook

    async def workload() -> Obj | None:
        return await workload_of(kube, kind, "train")

    wl = await eventually(workload, what=f"the {kind}'s Workload")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [(t.lower(), n) for t, n in replicas]
    assert wl["metadata"]["ownerReferences"][0]["kind"] == kind

    async def succeeded() -> Obj | None:
        current = await kube.get(resource, "default", "train")
        return current if true(current, "Succeeded") else None

    done = await eventually(succeeded, what=f"the {kind} Succeeded by its simulated operator")
    assert done["spec"]["runPolicy"]["suspend"] is False
    assert true(done, "Created")
    for replica_type, _ in replicas:
        tpl = done["spec"][field][replica_type]["template"]
        assert tpl["spec"]["nodeSelector"] == POOL
        assert tpl["metadata"]["labels"]["kueue.x-k8s.io/podset"] == replica_type.lower()
    statuses = done["status"]["replicaStatuses"]
    leading = replicas[0][0]
    assert statuses[leading]["succeeded"] == replicas[0][1]

    selector = "training.kubeflow.org/job-name=train"
    pods = (await kube.list(PODS, "default", label_selector=selector))["items"]
    assert sorted(p["metadata"]["name"] for p in pods) == pod_names(kind, "train")
    for pod in pods:
        labels = pod["metadata"]["labels"]
        assert labels["training.kubeflow.org/replica-type"] in {t.lower() for t, _ in replicas}
        assert labels["training.kubeflow.org/replica-index"].isdigit()
        assert pod["metadata"]["ownerReferences"][0]["kind"] == kind
        assert pod["spec"]["nodeSelector"] == POOL and pod["spec"]["nodeName"].startswith("cpu-")

    async def finished() -> Obj | None:
        current = await workload()
        return current if current is not None and true(current, "Finished") else None

    wl = await eventually(finished, what="the Workload Finished with the job")
    assert condition_of(wl, "Finished")["reason"] == "Succeeded"  # type: ignore[index]
    assert len((await kube.list(WORKLOADS, "default"))["items"]) == 1

    await eventually(lambda: quota_released(kube), what="the ClusterQueue's quota released")


@pytest.mark.parametrize("kind", list(KINDS))
async def test_preempted_suspended_restored_exactly_and_readmitted(kadmit: WebhookEnv, kind: str) -> None:
    """A running low-priority job makes room for a high-priority Job, as a Kueue Job would."""
    kube = kadmit.kube
    resource, field, replicas = KINDS[kind]
    await apply_small_setup(kube)
    low = kubeflow_job(kind, "low", cpu="1", runtime="1500ms", priority_class="low")  # 3 of the 4 cpu
    created = await kube.create(resource, low)
    original = copy.deepcopy(created["spec"][field])
    assert original == low["spec"][field]
    selector = "training.kubeflow.org/job-name=low"

    async def running() -> list[Obj] | None:
        pods = (await kube.list(PODS, "default", label_selector=selector))["items"]
        return pods if len(pods) == 3 and all(p["status"].get("phase") == "Running" for p in pods) else None

    first_run = {
        p["metadata"]["uid"] for p in await eventually(running, what=f"the low {kind}'s pods running")
    }

    async def pods_ready() -> Obj | None:
        wl = await workload_of(kube, kind, "low")
        return wl if wl is not None and true(wl, "PodsReady") else None

    await eventually(pods_ready, what="PodsReady from the operator's Running condition")
    await kube.create(
        JOBS, job("high", cpu="1", parallelism=2, runtime="1500ms", queue="small", priority_class="high")
    )

    async def preempted() -> Obj | None:
        wl = await workload_of(kube, kind, "low")
        return wl if wl is not None and true(wl, "Preempted") else None

    victim = await eventually(preempted, what=f"the {kind}'s Workload preempted")
    evicted = condition_of(victim, "Evicted")
    assert evicted is not None and evicted["status"] == "True" and evicted["reason"] == "Preempted", evicted

    async def stopped() -> Obj | None:
        current = await kube.get(resource, "default", "low")
        annotations = current["metadata"].get("annotations") or {}
        if (
            current["spec"]["runPolicy"].get("suspend") is not True
            or "kueue.x-k8s.io/stopping" in annotations
        ):
            return None
        if (await kube.list(PODS, "default", label_selector=selector))["items"]:
            return None
        return current if true(current, "Suspended") else None

    suspended = await eventually(stopped, what=f"the {kind} suspended, its pods gone, Suspended")
    assert suspended["spec"][field] == original  # the flavor's nodeSelector and podset label taken back
    assert not true(suspended, "Running")
    assert condition_of(suspended, "Suspended")["reason"] == f"{kind}Suspended"  # type: ignore[index]

    async def readmitted() -> Obj | None:
        wl = await workload_of(kube, kind, "low")
        evicted = wl and condition_of(wl, "Evicted")
        return (
            wl
            if wl is not None and true(wl, "Admitted") and evicted and evicted["status"] == "False"
            else None
        )

    await eventually(readmitted, within=20, what=f"the {kind}'s Workload re-admitted")

    async def succeeded() -> Obj | None:
        current = await kube.get(resource, "default", "low")
        return current if true(current, "Succeeded") else None

    done = await eventually(succeeded, within=20, what=f"the {kind} Succeeded after re-admission")
    assert condition_of(done, "Suspended")["reason"] == f"{kind}Resumed"  # type: ignore[index]
    for replica_type, _ in replicas:
        assert done["spec"][field][replica_type]["template"]["spec"]["nodeSelector"] == POOL
    pods = (await kube.list(PODS, "default", label_selector=selector))["items"]
    assert sorted(p["metadata"]["name"] for p in pods) == pod_names(kind, "low")
    assert not first_run & {p["metadata"]["uid"] for p in pods}  # run again, from scratch
    assert all(p["spec"]["nodeSelector"] == POOL for p in pods)


async def test_a_user_cannot_unsuspend_an_unadmitted_pytorchjob(kadmit: WebhookEnv) -> None:
    kube = kadmit.kube
    await apply_small_setup(kube)
    too_big = kubeflow_job("PyTorchJob", "too-big", cpu="2")  # 6 cpu, the queue has 4
    too_big["spec"]["runPolicy"] = {"suspend": False}  # the mutating webhook suspends it anyway
    assert (await kube.create(PYTORCH_JOBS, too_big))["spec"]["runPolicy"]["suspend"] is True

    async def pending() -> Obj | None:
        wl = await workload_of(kube, "PyTorchJob", "too-big")
        return wl if wl is not None and condition_of(wl, "QuotaReserved") is not None else None

    await eventually(pending, what="the PyTorchJob's Workload, pending")
    with pytest.raises(ApiError) as denied:
        await kube.patch(PYTORCH_JOBS, "default", "too-big", {"spec": {"runPolicy": {"suspend": False}}})
    assert denied.value.status in (400, 403)
    assert "PyTorchJob default/too-big cannot be unsuspended" in denied.value.message
    current = await kube.get(PYTORCH_JOBS, "default", "too-big")
    assert current["spec"]["runPolicy"]["suspend"] is True
    assert not (await kube.list(PODS, "default", label_selector="training.kubeflow.org/job-name=too-big"))[
        "items"
    ]


async def test_kueue_validation_messages(kadmit: WebhookEnv) -> None:
    kube = kadmit.kube
    await apply_small_setup(kube)
    bad = kubeflow_job("PyTorchJob", "bad")
    bad["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "Not_A_Name"
    with pytest.raises(ApiError) as denied:
        await kube.create(PYTORCH_JOBS, bad)
    assert 'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "Not_A_Name"' in denied.value.message

    pending = kubeflow_job("PyTorchJob", "pending", cpu="2", priority_class="low")  # 6 cpu: stays pending
    await kube.create(PYTORCH_JOBS, pending)
    with pytest.raises(ApiError) as denied:
        await kube.patch(
            PYTORCH_JOBS,
            "default",
            "pending",
            {"metadata": {"labels": {"kueue.x-k8s.io/priority-class": None}}},
        )
    assert "WorkloadPriorityClass cannot be removed from a workload" in denied.value.message
    # a suspended job may change its queue (on update, read from spec.runPolicy.suspend)
    moved = await kube.patch(
        PYTORCH_JOBS, "default", "pending", {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "other"}}}
    )
    assert moved["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "other"


@pytest.mark.parametrize("sample", [k.lower() for k in KINDS])
async def test_the_sample_completes_on_the_local_setup(kadmit: WebhookEnv, sample: str) -> None:
    """``manifests/samples/<kind>.yaml`` on ``kadmit local``'s sample queues, as the docs show it."""
    kube = kadmit.kube
    await local_setup.install_samples(kube)
    (created,) = await Applier(kube).apply_all(load_documents(MANIFESTS / "samples" / f"{sample}.yaml"))
    assert created["spec"]["runPolicy"]["suspend"] is True
    kind = created["kind"]
    resource = KINDS[kind][0]
    name = created["metadata"]["name"]

    async def succeeded() -> Obj | None:
        current = await kube.get(resource, "default", name)
        return current if true(current, "Succeeded") else None

    await eventually(succeeded, within=20, what=f"the sample {kind} Succeeded")

    async def finished() -> Obj | None:
        wl = await workload_of(kube, kind, name)
        return wl if wl is not None and true(wl, "Finished") else None

    wl = await eventually(finished, what="the sample's Workload Finished")
    assert wl["spec"]["queueName"] == "default"


async def test_a_failed_job_finishes_its_workload_as_failed(kadmit: WebhookEnv) -> None:
    kube = kadmit.kube
    await apply_small_setup(kube)
    body = kubeflow_job("PyTorchJob", "broken")
    master = body["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["metadata"]["annotations"]
    master["localcluster.kadmit.dev/exit-code"] = "3"
    await kube.create(PYTORCH_JOBS, body)

    async def finished() -> Obj | None:
        wl = await workload_of(kube, "PyTorchJob", "broken")
        return wl if wl is not None and true(wl, "Finished") else None

    wl = await eventually(finished, what="the Workload Finished as the operator failed the job")
    found = condition_of(wl, "Finished")
    assert found is not None and found["reason"] == "Failed", found
    assert found["message"] == "PyTorchJob broken is failed because 1 Master replica(s) failed."
