"""MultiKueue for RayJob, RayCluster, AppWrapper and TrainJob, kadmit on the manager (as its
ServiceAccount, under ``manifests/base/rbac.yaml``) and on both workers, every cluster running the
simulated KubeRay, AppWrapper and Trainer operators: each object runs on exactly one worker (every
store event of both workers sampled), the manager's operators leave the manager's object alone
(it is managed by MultiKueue), the worker's status is mirrored on the manager, and the copies
leave the worker at the end. And the never-twice guarantee for a RayJob: its worker cut off while
it runs, kadmit on the manager restarted during the disconnect, it never runs on the other worker."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from kadmit.checks.multikueue_remote import ORIGIN_LABEL, PREBUILT_WORKLOAD
from kadmit.kube import Resource
from kadmit.kube.resources import (
    APPWRAPPERS,
    CLUSTER_TRAINING_RUNTIMES,
    JOBSETS,
    MULTIKUEUE_CLUSTERS,
    PODS,
    RAY_CLUSTERS,
    RAY_JOBS,
    TRAIN_JOBS,
    WORKLOADS,
)
from kadmit.workload import find_condition, is_true
from tests.chaos.partitions import Partition, Runs, route_through
from tests.checks.conftest import JOBS, has_state
from tests.checks.multikueue_fixtures import CHECK, CLUSTER_NAME, NAMESPACE, MultiKueueEnv, multikueue_env
from tests.e2e.conftest import assert_kadmit_never_denied

Obj = dict[str, Any]
FRAMEWORKS = (
    "batch/job",
    "ray.io/rayjob",
    "ray.io/raycluster",
    "workload.codeflare.dev/appwrapper",
    "trainer.kubeflow.org/trainjob",
)
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
QUEUE = {"kueue.x-k8s.io/queue-name": "user-queue"}
RUNTIME = "localcluster.kadmit.dev/runtime"


def _container(name: str, cpu: str = "500m") -> Obj:
    return {"name": name, "image": "rayproject/ray:2.41.0", "resources": {"requests": {"cpu": cpu}}}


def _cluster_spec(workers: int = 2) -> Obj:
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [_container("head")]}}},
        "workerGroupSpecs": [
            {
                "groupName": "workers",
                "replicas": workers,
                "minReplicas": 0,
                "maxReplicas": 4,
                "rayStartParams": {},
                "template": {"spec": {"containers": [_container("worker")]}},
            }
        ],
    }


def rayjob(name: str, runtime: str = "1s") -> Obj:
    """A RayJob as it leaves the manager's webhooks on a MultiKueue queue: suspended, managedBy."""
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": dict(QUEUE),
            "annotations": {RUNTIME: runtime},
        },
        "spec": {
            "suspend": True,
            "managedBy": MULTIKUEUE,
            "entrypoint": "python -c 'import ray; ray.init()'",
            "shutdownAfterJobFinishes": True,
            "submitterPodTemplate": {
                "spec": {"restartPolicy": "Never", "containers": [_container("ray-job-submitter")]}
            },
            "rayClusterSpec": _cluster_spec(),
        },
    }


def raycluster(name: str) -> Obj:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": dict(QUEUE)},
        "spec": {"suspend": True, "managedBy": MULTIKUEUE, **_cluster_spec()},
    }


def appwrapper(name: str) -> Obj:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{name}-job"},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "template": {
                "metadata": {"annotations": {RUNTIME: "1s"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "500m"}}}
                    ],
                },
            },
        },
    }
    return {
        "apiVersion": "workload.codeflare.dev/v1beta2",
        "kind": "AppWrapper",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": dict(QUEUE)},
        "spec": {"suspend": True, "managedBy": MULTIKUEUE, "components": [{"template": job}]},
    }


def trainjob(name: str) -> Obj:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": dict(QUEUE)},
        "spec": {
            "suspend": True,
            "managedBy": MULTIKUEUE,
            "runtimeRef": {"name": "torch"},
            "trainer": {"numNodes": 2},
            # Kueue's runtime patch as the manager's webhook adds it: the copy must not carry it.
            "runtimePatches": [
                {"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {"spec": {}}}}
            ],
        },
    }


TORCH_RUNTIME: Obj = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "torch"},
    "spec": {
        "mlPolicy": {"numNodes": 1, "torch": {}},
        "template": {
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {
                            "metadata": {
                                "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                            },
                            "spec": {
                                "template": {
                                    "metadata": {"annotations": {RUNTIME: "1s"}},
                                    "spec": {
                                        "restartPolicy": "Never",
                                        "containers": [
                                            {
                                                "name": "node",
                                                "image": "busybox",
                                                "resources": {"requests": {"cpu": "500m"}},
                                            }
                                        ],
                                    },
                                }
                            },
                        },
                    }
                ]
            }
        },
    },
}


async def torch_runtime_everywhere(env: MultiKueueEnv) -> None:
    """The TrainJob's runtime on the manager (its pod sets) and on each worker (its JobSet)."""
    for kueue in (env.manager, *env.workers.values()):
        await kueue.create(CLUSTER_TRAINING_RUNTIMES, copy.deepcopy(TORCH_RUNTIME))


def _complete(o: Obj) -> bool:
    return any(
        c.get("type") == "Complete" and c.get("status") == "True"
        for c in (o.get("status") or {}).get("conditions") or []
    )


@dataclass(frozen=True)
class Kind:
    resource: Resource
    make: Callable[[str], Obj]
    mirrored: Callable[[Obj], bool]  # the manager's object shows the worker's status
    finishes: bool  # a RayCluster serves until deleted; the others end by themselves
    prepare: Callable[[MultiKueueEnv], Awaitable[None]] | None = None


KINDS = {
    "RayJob": Kind(
        RAY_JOBS,
        rayjob,
        lambda o: (
            (o.get("status") or {}).get("jobDeploymentStatus") == "Complete"
            and o["status"].get("jobStatus") == "SUCCEEDED"
        ),
        True,
    ),
    "RayCluster": Kind(
        RAY_CLUSTERS,
        raycluster,
        lambda o: (
            (o.get("status") or {}).get("state") == "ready" and o["status"].get("readyWorkerReplicas") == 2
        ),
        False,
    ),
    "TrainJob": Kind(TRAIN_JOBS, trainjob, _complete, True, torch_runtime_everywhere),
    "AppWrapper": Kind(
        APPWRAPPERS, appwrapper, lambda o: (o.get("status") or {}).get("phase") == "Succeeded", True
    ),
}


async def placed_workload(env: MultiKueueEnv, uid: str) -> Obj:
    """The manager's Workload of the object ``uid`` once the MultiKueue check is Ready."""

    def owned(wl: Obj) -> bool:
        return any(ref.get("uid") == uid for ref in wl["metadata"].get("ownerReferences") or [])

    return await env.manager.wait_for(
        WORKLOADS, NAMESPACE, None, lambda w: owned(w) and has_state(CHECK, "Ready")(w), within=40
    )


@pytest.mark.parametrize("kind_name", list(KINDS))
async def test_runs_on_exactly_one_worker_its_status_comes_back_and_its_copy_goes(kind_name: str) -> None:
    kind = KINDS[kind_name]
    async with multikueue_env(
        {"worker1": 0, "worker2": 8},
        kadmit_on_workers=True,
        kadmit_on_manager=True,
        frameworks=FRAMEWORKS,
        manager_controllers=True,
        kadmit_rbac=True,
    ) as env:
        await env.add_worker("worker2")
        runs = Runs(kind=(kind.resource.group, kind.resource.plural))
        for worker in ("worker1", "worker2"):
            runs.watch(worker, env.clusters.workers[worker])
        if kind.prepare is not None:
            await kind.prepare(env)
        created = await env.manager.create(kind.resource, kind.make("sample"))
        wl = await placed_workload(env, created["metadata"]["uid"])
        name = wl["metadata"]["name"]
        assert wl["status"]["clusterName"] == CLUSTER_NAME["worker2"]
        await env.workers["worker1"].wait_gone(WORKLOADS, NAMESPACE, name, within=15)

        # The copy on worker2: the spec without managedBy, ours, the prebuilt Workload's.
        remote = await env.workers["worker2"].wait_for(
            kind.resource, NAMESPACE, "sample", lambda o: True, within=15
        )
        # Cleared on the copy; the TrainJob CRD defaults it to the Trainer's own controller.
        assert remote["spec"].get("managedBy") in (None, "trainer.kubeflow.org/trainjob-controller")
        assert remote["metadata"]["labels"][ORIGIN_LABEL] == "multikueue"
        assert remote["metadata"]["annotations"][PREBUILT_WORKLOAD] == name

        # The worker's operator runs it; its status comes back to the manager's object.
        mirrored = await env.manager.wait_for(kind.resource, NAMESPACE, "sample", kind.mirrored, within=40)
        assert mirrored["spec"]["managedBy"] == MULTIKUEUE
        assert mirrored["spec"]["suspend"] is False  # admitted on the manager, run on the worker
        assert runs.started == {name: {"worker2"}}
        assert await env.workers["worker1"].listed(kind.resource, NAMESPACE) == []
        # The manager's operators left the manager's object alone: nothing of it runs there.
        assert await env.manager.listed(PODS, NAMESPACE) == []
        assert await env.manager.listed(JOBS, NAMESPACE) == []
        assert await env.manager.listed(JOBSETS, NAMESPACE) == []
        rayclusters = [o["metadata"]["name"] for o in await env.manager.listed(RAY_CLUSTERS, NAMESPACE)]
        assert rayclusters == (["sample"] if kind_name == "RayCluster" else [])
        assert [w["metadata"]["name"] for w in await env.manager.listed(WORKLOADS, NAMESPACE)] == [name]

        if kind.finishes:
            finished = await env.manager.wait_for(
                WORKLOADS, NAMESPACE, name, lambda w: is_true(w, "Finished"), within=20
            )
            assert find_condition(finished, "Finished")["reason"] == "Succeeded"
        else:  # a serving RayCluster ends when its user deletes it on the manager
            await env.manager.api.delete(kind.resource, NAMESPACE, "sample")
            await env.manager.wait_gone(WORKLOADS, NAMESPACE, name, within=20)

        # The end: the copy and its Workload leave the worker.
        await env.workers["worker2"].wait_gone(kind.resource, NAMESPACE, "sample", within=20)
        await env.workers["worker2"].wait_gone(WORKLOADS, NAMESPACE, name, within=20)
        assert runs.twice() == {}
        assert_kadmit_never_denied(env.clusters.manager)


async def test_a_rayjob_never_runs_on_two_workers_across_a_disconnect_and_a_manager_restart() -> None:
    """The RayJob runs on one worker; the manager loses that worker (its link cut) and kadmit on the
    manager is restarted during the disconnect, with nothing in memory. Every store event of both
    workers is sampled (RayJobs unsuspended, and the Ray Pods created): the RayJob is never started
    on the other worker, the restarted manager keeps the recorded winner, and once the link heals
    the RayJob completes where it ran and its status reaches the manager."""
    async with multikueue_env(
        {"worker1": 8, "worker2": 8},
        kadmit_on_workers=True,
        kadmit_on_manager=True,
        frameworks=FRAMEWORKS,
        worker_lost_timeout=60.0,
    ) as env:
        await env.add_worker("worker2")
        runs = Runs(kind=("ray.io", "rayjobs"))
        ray_pods: dict[str, set[str]] = {"worker1": set(), "worker2": set()}
        partitions: dict[str, Partition] = {}
        try:
            for worker in ("worker1", "worker2"):
                runs.watch(worker, env.clusters.workers[worker])
                env.clusters.workers[worker].store.add_listener(_pod_sampler(ray_pods[worker]))
                partitions[worker] = Partition(env.clusters.workers[worker].port)
                await partitions[worker].start()
                await route_through(env, worker, partitions[worker], f"{worker}-secret")
            for worker in ("worker1", "worker2"):
                await env.manager.wait_for(
                    MULTIKUEUE_CLUSTERS, None, CLUSTER_NAME[worker], active("True"), within=20
                )
            created = await env.manager.create(RAY_JOBS, rayjob("steady", runtime="6s"))
            wl = await placed_workload(env, created["metadata"]["uid"])
            name = wl["metadata"]["name"]
            winner = next(w for w, cluster in CLUSTER_NAME.items() if cluster == wl["status"]["clusterName"])
            other = "worker2" if winner == "worker1" else "worker1"
            await env.workers[winner].wait_for(
                RAY_JOBS,
                NAMESPACE,
                "steady",
                lambda rj: (rj.get("status") or {}).get("jobDeploymentStatus") == "Running",
                within=30,
            )

            # The disconnect, noticed by the manager; then kadmit on the manager restarts meanwhile.
            partitions[winner].cut()
            await env.manager.wait_for(
                MULTIKUEUE_CLUSTERS, None, CLUSTER_NAME[winner], active("False"), within=20
            )
            await env.restart_manager()
            for _ in range(10):  # sampled every 0.3 s while cut off: the winner stays recorded
                await asyncio.sleep(0.3)
                current = await env.manager.get(WORKLOADS, NAMESPACE, name)
                assert current["status"]["clusterName"] == CLUSTER_NAME[winner]
                assert has_state(CHECK, "Ready")(current)
                assert runs.twice() == {}
                assert ray_pods[other] == set()
            assert await env.workers[other].listed(RAY_JOBS, NAMESPACE) == []

            partitions[winner].heal()
            await env.manager.wait_for(
                MULTIKUEUE_CLUSTERS, None, CLUSTER_NAME[winner], active("True"), within=30
            )
            await env.manager.wait_for(RAY_JOBS, NAMESPACE, "steady", KINDS["RayJob"].mirrored, within=40)
            await env.manager.wait_for(
                WORKLOADS, NAMESPACE, name, lambda w: is_true(w, "Finished"), within=20
            )
        finally:
            for partition in partitions.values():
                await partition.stop()
        assert runs.twice() == {}
        assert runs.started == {name: {winner}}
        assert ray_pods[winner] and ray_pods[other] == set()
        assert await env.workers[other].listed(RAY_JOBS, NAMESPACE) == []


def _pod_sampler(seen: set[str]) -> Any:
    """A store listener recording every Ray Pod (``ray.io/cluster``) ever created on a worker."""

    def on_event(event: Any) -> None:
        if event.key != ("", "pods") or event.type == "DELETED":
            return
        labels = event.object["metadata"].get("labels") or {}
        if "ray.io/cluster" in labels:
            seen.add(event.object["metadata"]["name"])

    return on_event


def active(status: str) -> Any:
    def check(mkc: Obj) -> bool:
        return any(
            c.get("type") == "Active" and c.get("status") == status
            for c in (mkc.get("status") or {}).get("conditions") or []
        )

    return check
