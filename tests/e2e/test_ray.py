"""KubeRay's RayJob and RayCluster go the way a Job does: suspended by kadmit's webhooks, one
Workload with a pod set for the head, one per worker group (and the RayJob's submitter), admitted
as a gang with the flavor injected into every template, run by the local cluster's simulated
KubeRay operator (a default add-on), preempted by a higher-priority Job with the templates restored
exactly, and admitted again.

The ``kadmit`` fixture is ``kadmit local`` in-process (same CRDs, webhooks and configuration),
which manages RayJobs and RayClusters because the local cluster serves them."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from kadmit.kube import ApiError
from kadmit.kube.resources import CLUSTER_QUEUES, JOBS, PODS, RAY_CLUSTERS, RAY_JOBS, WORKLOADS
from tests.e2e.conftest import MANIFESTS, WebhookEnv, eventually
from tests.e2e.helpers import apply_small_setup, condition_of, job
from tests.e2e.test_kadmit_local import kubectl, kubectl_json
from tests.kadmit_local import kadmit_local

Obj = dict[str, Any]
POOL = {"kadmit.dev/pool": "cpu"}
RUNTIME = "localcluster.kadmit.dev/runtime"


def template(cpu: str) -> Obj:
    return {
        "spec": {
            "containers": [
                {
                    "name": "ray",
                    "image": "rayproject/ray:2.41.0",
                    "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}},
                }
            ]
        }
    }


def cluster_spec(workers: int = 2, cpu: str = "500m") -> Obj:
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": template(cpu)},
        "workerGroupSpecs": [
            {
                "groupName": "workers",
                "replicas": workers,
                "minReplicas": 0,
                "maxReplicas": 4,
                "rayStartParams": {},
                "template": template(cpu),
            }
        ],
    }


def rayjob(
    name: str, *, workers: int = 2, cpu: str = "500m", runtime: str = "300ms", queue: str = "small"
) -> Obj:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": queue},
            "annotations": {RUNTIME: runtime},
        },
        "spec": {
            "entrypoint": "python -c 'import ray; ray.init()'",
            "shutdownAfterJobFinishes": True,
            "submitterPodTemplate": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "ray-job-submitter",
                            "image": "rayproject/ray:2.41.0",
                            "resources": {"requests": {"cpu": "500m", "memory": "100Mi"}},
                        }
                    ],
                }
            },
            "rayClusterSpec": cluster_spec(workers, cpu),
        },
    }


def raycluster(name: str, *, workers: int = 2, cpu: str = "500m", queue: str = "small") -> Obj:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": cluster_spec(workers, cpu),
    }


def true(obj: Obj, kind: str) -> bool:
    return any(
        c["type"] == kind and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions") or []
    )


async def workload_named(kube: Any, prefix: str) -> Obj | None:
    for wl in (await kube.list(WORKLOADS, "default"))["items"]:
        if wl["metadata"]["name"].startswith(prefix):
            return wl  # type: ignore[no-any-return]
    return None


def templates_of_rayjob(obj: Obj) -> dict[str, Obj]:
    spec = obj["spec"]
    cluster = spec["rayClusterSpec"]
    out = {"head": cluster["headGroupSpec"]["template"]}
    out.update({g["groupName"]: g["template"] for g in cluster["workerGroupSpecs"]})
    out["submitter"] = spec["submitterPodTemplate"]
    return out


def templates_of_cluster(obj: Obj) -> dict[str, Obj]:
    spec = obj["spec"]
    out = {"head": spec["headGroupSpec"]["template"]}
    out.update({g["groupName"]: g["template"] for g in spec["workerGroupSpecs"]})
    return out


async def test_rayjob_is_suspended_admitted_with_its_submitter_and_completes(kadmit: WebhookEnv) -> None:
    kube = kadmit.kube
    await apply_small_setup(kube)
    created = await kube.create(RAY_JOBS, rayjob("train"))
    assert created["spec"]["suspend"] is True  # by the mutating webhook mrayjob.kb.io

    wl = await eventually(lambda: workload_named(kube, "rayjob-train-"), what="the RayJob's Workload")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [
        ("head", 1),
        ("workers", 2),
        ("submitter", 1),
    ]

    async def completed() -> Obj | None:
        current = await kube.get(RAY_JOBS, "default", "train")
        status = current.get("status") or {}
        return current if status.get("jobDeploymentStatus") == "Complete" else None

    done = await eventually(completed, within=30, what="the RayJob Complete")
    assert done["status"]["jobStatus"] == "SUCCEEDED"
    assert done["spec"]["suspend"] is False
    for name, tmpl in templates_of_rayjob(done).items():
        assert tmpl["spec"]["nodeSelector"] == POOL, name
        assert tmpl["metadata"]["labels"]["kueue.x-k8s.io/podset"] == name

    submitter = await kube.get(JOBS, "default", "train")  # KubeRay's submitter Job, named after the RayJob
    assert submitter["metadata"]["ownerReferences"][0]["kind"] == "RayJob"
    assert submitter["spec"]["template"]["spec"]["nodeSelector"] == POOL
    assert true(submitter, "Complete")

    async def finished() -> Obj | None:
        current = await workload_named(kube, "rayjob-train-")
        return current if current is not None and true(current, "Finished") else None

    wl = await eventually(finished, what="the Workload Finished with the RayJob")
    assert condition_of(wl, "Finished")["reason"] == "Succeeded"  # type: ignore[index]
    usage = {a["name"]: a["resourceUsage"]["cpu"] for a in wl["status"]["admission"]["podSetAssignments"]}
    assert usage == {"head": "500m", "workers": "1", "submitter": "500m"}
    # the RayCluster and the submitter Job are the RayJob's: no Workload of their own
    assert len((await kube.list(WORKLOADS, "default"))["items"]) == 1

    async def cluster_gone() -> bool:  # shutdownAfterJobFinishes
        clusters = (await kube.list(RAY_CLUSTERS, "default"))["items"]
        return not clusters

    await eventually(cluster_gone, what="the RayJob's RayCluster deleted after it finished")

    async def released() -> bool:
        status = (await kube.get(CLUSTER_QUEUES, None, "small")).get("status") or {}
        return status.get("admittedWorkloads") == 0

    await eventually(released, what="the ClusterQueue's quota released")


async def test_a_preempted_rayjob_is_suspended_restored_and_readmitted(kadmit: WebhookEnv) -> None:
    kube = kadmit.kube
    await apply_small_setup(kube)
    # head 1 + worker 1 + submitter 0.5 of 4 cpu, for long enough to be preempted on a loaded machine
    low = rayjob("low", workers=1, cpu="1", runtime="5s")
    low["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "low"
    created = await kube.create(RAY_JOBS, low)
    original = templates_of_rayjob(created)

    async def running() -> Obj | None:
        current = await kube.get(RAY_JOBS, "default", "low")
        status = current.get("status") or {}
        if status.get("jobDeploymentStatus") != "Running":
            return None
        selector = f"ray.io/cluster={status['rayClusterName']}"
        pods = (await kube.list(PODS, "default", label_selector=selector))["items"]
        return current if pods else None

    first = await eventually(running, within=30, what="the low RayJob Running")
    first_cluster = first["status"]["rayClusterName"]
    pods = (await kube.list(PODS, "default", label_selector=f"ray.io/cluster={first_cluster}"))["items"]
    assert {p["metadata"]["labels"]["ray.io/node-type"] for p in pods} == {"head", "worker"}
    assert all(p["spec"]["nodeSelector"] == POOL for p in pods)

    await kube.create(
        JOBS, job("high", cpu="1", parallelism=3, runtime="1500ms", queue="small", priority_class="high")
    )

    async def preempted() -> Obj | None:
        wl = await workload_named(kube, "rayjob-low-")
        return wl if wl is not None and true(wl, "Preempted") else None

    victim = await eventually(preempted, what="the RayJob's Workload preempted")
    assert condition_of(victim, "Evicted")["reason"] == "Preempted"  # type: ignore[index]

    async def stopped() -> Obj | None:
        current = await kube.get(RAY_JOBS, "default", "low")
        annotations = current["metadata"].get("annotations") or {}
        if current["spec"].get("suspend") is not True or "kueue.x-k8s.io/stopping" in annotations:
            return None
        if (current.get("status") or {}).get("jobDeploymentStatus") != "Suspended":
            return None
        return current

    suspended = await eventually(stopped, within=20, what="the RayJob suspended, its cluster gone")
    assert templates_of_rayjob(suspended) == original  # the flavor's nodeSelector and podset label taken back
    assert not (await kube.list(RAY_CLUSTERS, "default"))["items"]

    async def readmitted() -> Obj | None:
        wl = await workload_named(kube, "rayjob-low-")
        evicted = wl is not None and true(wl, "Admitted") and condition_of(wl, "Evicted")
        return wl if evicted and evicted["status"] == "False" else None

    await eventually(readmitted, within=30, what="the RayJob's Workload re-admitted")

    async def completed() -> Obj | None:
        current = await kube.get(RAY_JOBS, "default", "low")
        return current if (current.get("status") or {}).get("jobDeploymentStatus") == "Complete" else None

    done = await eventually(completed, within=30, what="the RayJob Complete after re-admission")
    assert done["status"]["jobStatus"] == "SUCCEEDED"
    for tmpl in templates_of_rayjob(done).values():
        assert tmpl["spec"]["nodeSelector"] == POOL


async def test_raycluster_serves_is_preempted_restored_and_readmitted(kadmit: WebhookEnv) -> None:
    kube = kadmit.kube
    await apply_small_setup(kube)
    low = raycluster("serve", workers=2, cpu="1")  # 3 of the queue's 4 cpu
    low["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "low"
    created = await kube.create(RAY_CLUSTERS, low)
    assert created["spec"]["suspend"] is True  # by the mutating webhook mraycluster.kb.io
    original = templates_of_cluster(created)

    wl = await eventually(lambda: workload_named(kube, "raycluster-serve-"), what="the RayCluster's Workload")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("head", 1), ("workers", 2)]

    async def ready() -> Obj | None:
        current = await kube.get(RAY_CLUSTERS, "default", "serve")
        return current if (current.get("status") or {}).get("state") == "ready" else None

    serving = await eventually(ready, within=30, what="the RayCluster ready")
    assert serving["status"]["readyWorkerReplicas"] == 2
    for tmpl in templates_of_cluster(serving).values():
        assert tmpl["spec"]["nodeSelector"] == POOL
    pods = (await kube.list(PODS, "default", label_selector="ray.io/cluster=serve"))["items"]
    assert sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in pods) == ["head", "worker", "worker"]
    assert all(p["spec"]["nodeSelector"] == POOL and p["status"]["phase"] == "Running" for p in pods)

    async def pods_ready() -> Obj | None:  # kadmit sees the Pods ready after the RayCluster says so
        current = await workload_named(kube, "raycluster-serve-")
        return current if current is not None and true(current, "PodsReady") else None

    await eventually(pods_ready, within=30, what="the RayCluster's Workload PodsReady")

    await kube.create(
        JOBS, job("high", cpu="1", parallelism=2, runtime="1500ms", queue="small", priority_class="high")
    )

    async def stopped() -> Obj | None:
        current = await kube.get(RAY_CLUSTERS, "default", "serve")
        annotations = current["metadata"].get("annotations") or {}
        if current["spec"].get("suspend") is not True or "kueue.x-k8s.io/stopping" in annotations:
            return None
        return current if (current.get("status") or {}).get("state") == "suspended" else None

    suspended = await eventually(stopped, within=20, what="the RayCluster suspended, its pods gone")
    assert templates_of_cluster(suspended) == original
    assert not (await kube.list(PODS, "default", label_selector="ray.io/cluster=serve"))["items"]
    victim = await workload_named(kube, "raycluster-serve-")
    assert victim is not None and condition_of(victim, "Preempted")["reason"] == "InClusterQueue"  # type: ignore[index]

    serving = await eventually(ready, within=30, what="the RayCluster serving again after re-admission")
    for tmpl in templates_of_cluster(serving).values():
        assert tmpl["spec"]["nodeSelector"] == POOL
    wl = await workload_named(kube, "raycluster-serve-")
    assert wl is not None and true(wl, "Admitted") and not true(wl, "Finished")


async def test_kueue_rules_for_ray_objects(kadmit: WebhookEnv) -> None:
    kube = kadmit.kube
    await apply_small_setup(kube)
    bad = rayjob("bad")
    bad["spec"]["shutdownAfterJobFinishes"] = False
    bad["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
    bad["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["groupName"] = "head"
    with pytest.raises(ApiError) as denied:
        await kube.create(RAY_JOBS, bad)
    assert denied.value.message.endswith(
        "[spec.shutdownAfterJobFinishes: Invalid value: false: a kueue managed job should delete the cluster "
        "after finishing, spec.rayClusterSpec.enableInTreeAutoscaling: Invalid value: true: a kueue managed "
        "job should only use autoscaling when workload slicing is enabled, "
        'spec.rayClusterSpec.workerGroupSpecs[0].groupName: Forbidden: "head" is reserved for the head group]'
    ), denied.value.message

    scaling = raycluster("scaling")
    scaling["spec"]["enableInTreeAutoscaling"] = True
    with pytest.raises(ApiError) as denied:
        await kube.create(RAY_CLUSTERS, scaling)
    assert (
        "spec.enableInTreeAutoscaling: Invalid value: true: a kueue-managed RayCluster can use autoscaling "
        "only as an elastic job" in denied.value.message
    )

    too_big = raycluster("too-big", workers=4, cpu="2")  # 10 cpu, the queue has 4
    assert (await kube.create(RAY_CLUSTERS, too_big))["spec"]["suspend"] is True
    await eventually(lambda: workload_named(kube, "raycluster-too-big-"), what="the pending Workload")
    with pytest.raises(ApiError) as denied:
        await kube.patch(RAY_CLUSTERS, "default", "too-big", {"spec": {"suspend": False}})
    assert "RayCluster default/too-big cannot be unsuspended" in denied.value.message


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_the_samples_run_with_kubectl_on_kadmit_local(tmp_path: Path) -> None:
    """``manifests/samples/rayjob.yaml``, ``raycluster.yaml`` and ``appwrapper.yaml`` as docs/kinds.md
    shows them: ``kadmit local`` says it manages the kinds, kubectl creates the samples, they run."""
    async with kadmit_local(tmp_path) as local:
        kubeconfig = local.kubeconfig
        manages = await local.next_line()
        for kind in (
            "ray.io/v1 RayJob (ray.io/rayjob)",
            "ray.io/v1 RayCluster (ray.io/raycluster)",
            "workload.codeflare.dev/v1beta2 AppWrapper (workload.codeflare.dev/appwrapper)",
        ):
            assert kind in manages, manages
        for sample in ("rayjob.yaml", "raycluster.yaml", "appwrapper.yaml"):
            await kubectl(kubeconfig, "create", "-f", str(MANIFESTS / "samples" / sample))

        async def done() -> bool:
            rj = await kubectl_json(kubeconfig, "get", "rayjob", "sample-rayjob")
            rc = await kubectl_json(kubeconfig, "get", "raycluster", "sample-raycluster")
            aw = await kubectl_json(kubeconfig, "get", "appwrapper", "sample-appwrapper")
            return (
                (rj.get("status") or {}).get("jobDeploymentStatus") == "Complete"
                and (rc.get("status") or {}).get("state") == "ready"
                and (aw.get("status") or {}).get("phase") == "Succeeded"
            )

        await eventually(
            done, within=60, what="the RayJob Complete, the RayCluster ready, the AppWrapper Succeeded"
        )
        workloads = (await kubectl_json(kubeconfig, "get", "workloads"))["items"]
        names = sorted(w["metadata"]["name"].rsplit("-", 1)[0] for w in workloads)
        assert names == [
            "appwrapper-sample-appwrapper",
            "raycluster-sample-raycluster",
            "rayjob-sample-rayjob",
        ]
        assert all(w["spec"]["queueName"] == "default" for w in workloads)
        pods = (await kubectl_json(kubeconfig, "get", "pods", "-l", "ray.io/cluster=sample-raycluster"))[
            "items"
        ]
        assert sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in pods) == [
            "head",
            "worker",
            "worker",
        ]
