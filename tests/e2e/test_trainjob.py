"""A Kubeflow Trainer v2 TrainJob on ``kadmit local``'s cluster: suspended by kadmit's webhook
(which also gives it Kueue's runtime patch), one Workload with the pod sets of the JobSet the
Trainer builds from the referenced runtime, admitted with the flavor written into the runtime
patch, run by the simulated Trainer (a JobSet named after it) to ``Complete``; preempted by a
higher-priority Job, suspended, its patch emptied (restored exactly), re-admitted and run again."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from kadmit.controller import local_setup
from kadmit.controller.apply import Applier, load_documents
from kadmit.kube import ApiError, Resource
from kadmit.kube.resources import (
    CLUSTER_TRAINING_RUNTIMES,
    JOBS,
    JOBSETS,
    PODS,
    TRAIN_JOBS,
    TRAINING_RUNTIMES,
    WORKLOADS,
)
from tests.e2e.conftest import MANIFESTS, Env, WebhookEnv, eventually, fast_config
from tests.e2e.helpers import apply_small_setup, condition_of, job, quota_released

Obj = dict[str, Any]
POOL = {"kadmit.dev/pool": "cpu"}
KUEUE_PATCH = {"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {"spec": {}}}}


def runtime(name: str, *, kind: str = "ClusterTrainingRuntime", runtime_s: str = "200ms") -> Obj:
    def replicated(name: str, step: str, container: str, cpu: str) -> Obj:
        return {
            "name": name,
            "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": step}},
                "spec": {
                    "template": {
                        "metadata": {"annotations": {"localcluster.kadmit.dev/runtime": runtime_s}},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": container,
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}},
                                }
                            ],
                        },
                    }
                },
            },
        }

    metadata: Obj = {"name": name}
    if kind == "TrainingRuntime":
        metadata["namespace"] = "default"
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": kind,
        "metadata": metadata,
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        replicated(
                            "dataset-initializer", "dataset-initializer", "dataset-initializer", "250m"
                        ),
                        replicated("node", "trainer", "node", "500m"),
                    ]
                }
            },
        },
    }


def trainjob(
    name: str,
    runtime_name: str,
    *,
    nodes: int = 2,
    cpu: str | None = None,
    priority: str | None = None,
    runtime_kind: str | None = None,
) -> Obj:
    labels = {"kueue.x-k8s.io/queue-name": "small"}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    trainer: Obj = {"numNodes": nodes}
    if cpu:
        trainer["resourcesPerNode"] = {"requests": {"cpu": cpu, "memory": "100Mi"}}
    ref: Obj = {"name": runtime_name}
    if runtime_kind:
        ref["kind"] = runtime_kind
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"runtimeRef": ref, "trainer": trainer},
    }


def true(obj: Obj, kind: str) -> bool:
    found = condition_of(obj, kind)
    return found is not None and found["status"] == "True"


async def workload_of(kube: Any, name: str) -> Obj | None:
    for wl in (await kube.list(WORKLOADS, "default"))["items"]:
        if wl["metadata"]["name"].startswith(f"trainjob-{name}-"):
            return wl  # type: ignore[no-any-return]
    return None


async def test_trainjob_queued_admitted_through_its_runtime_patch_and_completes(kadmit: WebhookEnv) -> None:
    kube = kadmit.kube
    await apply_small_setup(kube)
    await kube.create(CLUSTER_TRAINING_RUNTIMES, runtime("torch"))
    created = await kube.create(TRAIN_JOBS, trainjob("train", "torch", nodes=2))
    assert created["spec"]["suspend"] is True  # by the mutating webhook mtrainjob.kb.io
    assert created["spec"]["runtimePatches"] == [KUEUE_PATCH]

    async def workload() -> Obj | None:
        return await workload_of(kube, "train")

    wl = await eventually(workload, what="the TrainJob's Workload")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [
        ("dataset-initializer", 1),
        ("node", 2),
    ]

    async def complete() -> Obj | None:
        current = await kube.get(TRAIN_JOBS, "default", "train")
        return current if true(current, "Complete") else None

    done = await eventually(complete, within=20, what="the TrainJob Complete")
    assert done["spec"]["suspend"] is False
    (patch,) = done["spec"]["runtimePatches"]
    injected = {
        rj["name"]: rj["template"]["spec"]["template"]
        for rj in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    }
    assert {name: t["spec"]["nodeSelector"] for name, t in injected.items()} == {
        "dataset-initializer": POOL,
        "node": POOL,
    }
    assert injected["node"]["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "node"
    assert {s["name"]: s["succeeded"] for s in done["status"]["jobsStatus"]} == {
        "dataset-initializer": 1,
        "node": 1,
    }

    jobset = await kube.get(JOBSETS, "default", "train")
    assert jobset["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    pods = (await kube.list(PODS, "default", label_selector="jobset.sigs.k8s.io/jobset-name=train"))["items"]
    assert len(pods) == 3 and all(p["spec"]["nodeSelector"] == POOL for p in pods)
    node_pods = [
        p for p in pods if p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "node"
    ]
    assert len(node_pods) == 2

    async def finished() -> Obj | None:
        current = await workload()
        return current if current is not None and true(current, "Finished") else None

    wl = await eventually(finished, what="the Workload Finished with the TrainJob")
    assert condition_of(wl, "Finished")["reason"] == "Succeeded"  # type: ignore[index]
    # the JobSet is the TrainJob's: kadmit made no Workload of its own for it
    assert len((await kube.list(WORKLOADS, "default"))["items"]) == 1

    await eventually(lambda: quota_released(kube), what="the ClusterQueue's quota released")


async def test_a_preempted_trainjob_is_suspended_restored_exactly_and_readmitted(kadmit: WebhookEnv) -> None:
    kube = kadmit.kube
    await apply_small_setup(kube)
    await kube.create(TRAINING_RUNTIMES, runtime("torch-ns", kind="TrainingRuntime", runtime_s="1500ms"))
    # 1 cpu per node, 250m for the initializer: 2.25 of the queue's 4 cpu
    body = trainjob("low", "torch-ns", nodes=2, cpu="1", priority="low", runtime_kind="TrainingRuntime")
    created = await kube.create(TRAIN_JOBS, body)
    original = copy.deepcopy(created["spec"])
    selector = "jobset.sigs.k8s.io/jobset-name=low"

    async def running() -> list[Obj] | None:
        pods = (await kube.list(PODS, "default", label_selector=selector))["items"]
        return pods if len(pods) == 3 and all(p["status"].get("phase") == "Running" for p in pods) else None

    first_run = {
        p["metadata"]["uid"] for p in await eventually(running, what="the low TrainJob's pods running")
    }
    await kube.create(
        JOBS, job("high", cpu="1", parallelism=2, runtime="1500ms", queue="small", priority_class="high")
    )

    async def preempted() -> Obj | None:
        wl = await workload_of(kube, "low")
        return wl if wl is not None and true(wl, "Preempted") else None

    await eventually(preempted, what="the TrainJob's Workload preempted")

    async def stopped() -> Obj | None:
        current = await kube.get(TRAIN_JOBS, "default", "low")
        annotations = current["metadata"].get("annotations") or {}
        if current["spec"].get("suspend") is not True or "kueue.x-k8s.io/stopping" in annotations:
            return None
        if (await kube.list(PODS, "default", label_selector=selector))["items"]:
            return None
        return current if true(current, "Suspended") else None

    suspended = await eventually(stopped, what="the TrainJob suspended, its pods gone, Suspended")
    assert suspended["spec"] == original  # the Kueue runtime patch emptied again
    assert (await kube.get(JOBSETS, "default", "low"))["spec"]["suspend"] is True

    async def complete() -> Obj | None:
        current = await kube.get(TRAIN_JOBS, "default", "low")
        return current if true(current, "Complete") else None

    done = await eventually(complete, within=25, what="the TrainJob Complete after re-admission")
    assert condition_of(done, "Suspended")["reason"] == "Resumed"  # type: ignore[index]
    pods = (await kube.list(PODS, "default", label_selector=selector))["items"]
    assert pods and not first_run & {p["metadata"]["uid"] for p in pods}  # run again, from scratch
    assert all(p["spec"]["nodeSelector"] == POOL for p in pods)


async def test_the_trainjob_sample_completes_on_the_local_setup(kadmit: WebhookEnv) -> None:
    kube = kadmit.kube
    await local_setup.install_samples(kube)
    docs = load_documents(MANIFESTS / "samples" / "trainjob.yaml")
    created = await Applier(kube).apply_all(docs)
    assert created[1]["spec"]["suspend"] is True

    async def finished() -> Obj | None:
        wl = await workload_of(kube, "sample-trainjob")
        return wl if wl is not None and true(wl, "Finished") else None

    wl = await eventually(finished, within=20, what="the sample TrainJob's Workload Finished")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("node", 2)]
    assert wl["spec"]["queueName"] == "default"


async def test_without_the_runtime_crds_the_trainjob_integration_is_left_out(env: Env) -> None:
    """TrainJobs need their runtimes: with the ClusterTrainingRuntime API gone the integration is
    left out, as an integration whose own kind is not served is, instead of waiting forever."""
    crds = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    await env.kube.delete(crds, None, "clustertrainingruntimes.trainer.kubeflow.org")

    async def gone() -> bool:
        try:
            await env.kube.request("GET", CLUSTER_TRAINING_RUNTIMES.path(), query={"limit": 1})
        except ApiError as exc:
            return exc.not_found
        return False

    await eventually(gone, what="the ClusterTrainingRuntime API gone")
    frameworks = ("batch/job", "kubeflow.org/pytorchjob", "trainer.kubeflow.org/trainjob")
    manager = await env.start_manager(dataclasses.replace(fast_config(), frameworks=frameworks))
    assert [i.kind for i in manager.integrations] == ["Job", "PyTorchJob"]
    assert [r.integration.kind for r in manager.job_reconcilers] == ["Job", "PyTorchJob"]
