"""MultiKueue and elastic Jobs (ElasticJobsViaWorkloadSlices), kadmit on the manager and on both
workers: an elastic Job runs on a worker; scaled up on the manager, its new Workload slice goes to
that worker only (never a new nomination, though another worker with room has joined), is admitted
there for the delta, the worker's copy takes the new parallelism and runs its new Pod, and the
manager's slice turns Admitted; scaled down, the worker's copy and both Workloads shrink in place
and the quota comes back on both sides. The copy is never deleted nor recreated meanwhile. An
elastic RayCluster's worker group is resized on its worker the same way."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from kadmit.checks.multikueue_remote import PREBUILT_WORKLOAD
from kadmit.kube import Resource
from kadmit.kube.resources import CLUSTER_QUEUES, MULTIKUEUE_CLUSTERS, PODS, RAY_CLUSTERS, WORKLOADS
from kadmit.workload import find_condition, is_true
from tests.checks.conftest import JOBS, KueueCluster, has_state
from tests.checks.kueue_standin import suspended_job
from tests.checks.multikueue_fixtures import CHECK, CLUSTER_NAME, NAMESPACE, multikueue_env
from tests.e2e.conftest import eventually

Obj = dict[str, Any]
ELASTIC = "kueue.x-k8s.io/elastic-job"
GATE = "kueue.x-k8s.io/elastic-job"
REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"


def elastic_job(name: str, parallelism: int) -> Obj:
    """An elastic Job as the manager's webhook leaves it: managed by MultiKueue, its Pods gated."""
    job = suspended_job(name, cpu="1", runtime="300s", parallelism=parallelism)
    job["metadata"]["namespace"] = NAMESPACE
    job["metadata"]["annotations"] = {ELASTIC: "true"}
    job["spec"]["completions"] = 12
    job["spec"]["managedBy"] = MULTIKUEUE
    job["spec"]["template"]["spec"]["schedulingGates"] = [{"name": GATE}]
    return job


def replacing(uid: str, old_name: str) -> Callable[[Obj], bool]:
    """A Workload of the job ``uid`` that replaces its slice ``old_name`` (a new slice)."""

    def new_slice(w: Obj) -> bool:
        annotations = w["metadata"].get("annotations") or {}
        return owned_by(w, uid) and annotations.get(REPLACEMENT_FOR) == f"{NAMESPACE}/{old_name}"

    return new_slice


def owned_by(obj: Obj, uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or [])


async def running_pods(cluster: KueueCluster, job_uid: str) -> list[Obj]:
    """The Job's Pods that have not ended, when none is gated and all are bound to a Node."""
    pods = [
        p
        for p in await cluster.listed(PODS, NAMESPACE)
        if owned_by(p, job_uid) and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]
    if any(p["spec"].get("schedulingGates") or not p["spec"].get("nodeName") for p in pods):
        return []
    return pods


async def reserved_cpu(cluster: KueueCluster) -> str | None:
    cq = await cluster.get(CLUSTER_QUEUES, None, "cluster-queue")
    for flavor in (cq.get("status") or {}).get("flavorsReservation") or []:
        for resource in flavor["resources"]:
            if resource["name"] == "cpu":
                return str(resource["total"])
    return None


class NothingOn:
    """Samples a worker's Workloads and Jobs in the background: there must never be one."""

    def __init__(self, cluster: KueueCluster, kinds: tuple[Resource, ...] = (WORKLOADS, JOBS)) -> None:
        self.cluster, self.kinds, self.samples, self.seen = cluster, kinds, 0, set[str]()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            for kind in self.kinds:
                self.seen |= {o["metadata"]["name"] for o in await self.cluster.listed(kind, NAMESPACE)}
            self.samples += 1
            await asyncio.sleep(0.1)

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def test_an_elastic_job_scaled_on_the_manager_is_resized_on_the_worker_that_runs_it() -> None:
    async with multikueue_env(
        {"worker1": 4, "worker2": 8}, kadmit_on_workers=True, kadmit_on_manager=True
    ) as env:
        worker1, manager = env.workers["worker1"], env.manager
        created = await manager.create(JOBS, elastic_job("elastic", parallelism=2))
        uid = created["metadata"]["uid"]
        first = await manager.wait_for(
            WORKLOADS, NAMESPACE, None, lambda w: owned_by(w, uid) and has_state(CHECK, "Ready")(w), within=60
        )
        first_name = first["metadata"]["name"]
        assert first["status"]["clusterName"] == CLUSTER_NAME["worker1"]
        copy_ = await worker1.wait_for(
            JOBS, NAMESPACE, "elastic", lambda j: j["spec"].get("suspend") is False, within=30
        )
        copy_uid = copy_["metadata"]["uid"]
        # The copy's Pods pass their elastic-job gate on the worker, as its Workload grants them.
        assert len(await eventually(lambda: running_pods(worker1, copy_uid), 60, "2 pods on worker1")) == 2

        # A second worker with more room joins; the running job must not move there, nor grow there.
        await env.add_worker("worker2")
        sampler = NothingOn(env.workers["worker2"])
        try:
            # Scale up on the manager: a new slice, dispatched only to worker1 and admitted there.
            await manager.api.patch(JOBS, NAMESPACE, "elastic", {"spec": {"parallelism": 3}})

            new_slice = replacing(uid, first_name)

            second = await manager.wait_for(
                WORKLOADS, NAMESPACE, None, lambda w: new_slice(w) and is_true(w, "Admitted"), within=60
            )
            second_name = second["metadata"]["name"]
            assert second["status"]["clusterName"] == CLUSTER_NAME["worker1"]
            assert has_state(CHECK, "Ready")(second)
            assert not second["status"].get("nominatedClusterNames")
            assert [p["count"] for p in second["spec"]["podSets"]] == [3]
            replaced = await manager.wait_for(
                WORKLOADS, NAMESPACE, first_name, lambda w: is_true(w, "Finished"), within=30
            )
            assert (find_condition(replaced, "Finished") or {}).get("reason") == "WorkloadSliceReplaced"

            # The worker's copy: the same Job, now at 3 and running under the new slice.
            grown = await worker1.wait_for(
                JOBS,
                NAMESPACE,
                "elastic",
                lambda j: (
                    j["spec"].get("parallelism") == 3
                    and j["metadata"]["annotations"].get(PREBUILT_WORKLOAD) == second_name
                ),
                within=30,
            )
            assert grown["metadata"]["uid"] == copy_uid and grown["spec"]["suspend"] is False
            remote_second = await worker1.wait_for(
                WORKLOADS, NAMESPACE, second_name, lambda w: is_true(w, "Admitted"), within=30
            )
            assert [p["count"] for p in remote_second["spec"]["podSets"]] == [3]
            remote_first = await worker1.wait_for(
                WORKLOADS, NAMESPACE, first_name, lambda w: is_true(w, "Finished"), within=30
            )
            assert (find_condition(remote_first, "Finished") or {}).get("reason") == "WorkloadSliceReplaced"
            assert (
                len(await eventually(lambda: running_pods(worker1, copy_uid), 60, "3 pods on worker1")) == 3
            )
            await eventually(lambda: _equals(reserved_cpu(worker1), "3"), 30, "3 cpu reserved on worker1")
            await eventually(lambda: _equals(reserved_cpu(manager), "3"), 30, "3 cpu reserved on the manager")
            # Kueue's counters: each slice dispatched to worker1 and admitted there, once.
            metrics = env.plugin.metrics.registry
            for worker, count in (("worker1", 2.0), ("worker2", None)):
                labels = {"cluster_queue": "cluster-queue", "cluster": CLUSTER_NAME[worker]}
                assert metrics.get_sample_value("multikueue_workloads_dispatched_total", labels) == count
                assert metrics.get_sample_value("multikueue_workloads_admitted_total", labels) == count

            # Scale down: the slice shrinks in place on both sides, and so does the copy.
            await manager.api.patch(JOBS, NAMESPACE, "elastic", {"spec": {"parallelism": 1}})
            await worker1.wait_for(
                JOBS, NAMESPACE, "elastic", lambda j: j["spec"].get("parallelism") == 1, within=30
            )
            for cluster in (manager, worker1):
                shrunk = await cluster.wait_for(
                    WORKLOADS,
                    NAMESPACE,
                    second_name,
                    lambda w: [p["count"] for p in w["spec"]["podSets"]] == [1],
                    within=30,
                )
                assert is_true(shrunk, "Admitted") and not is_true(shrunk, "Finished")
                await eventually(lambda c=cluster: _equals(reserved_cpu(c), "1"), 30, "1 cpu reserved")
            assert has_state(CHECK, "Ready")(await manager.get(WORKLOADS, NAMESPACE, second_name))
            assert len(await eventually(lambda: running_pods(worker1, copy_uid), 60, "1 pod on worker1")) == 1
            current = await worker1.get(JOBS, NAMESPACE, "elastic")
            assert current["metadata"]["uid"] == copy_uid and current["spec"]["suspend"] is False

            # Deleted on the manager: the copy and both slices' copies leave the worker.
            await manager.api.delete(JOBS, NAMESPACE, "elastic", propagation_policy="Background")
            await worker1.wait_gone(JOBS, NAMESPACE, "elastic", within=30)
            for name in (first_name, second_name):
                await manager.wait_gone(WORKLOADS, NAMESPACE, name, within=30)
                await worker1.wait_gone(WORKLOADS, NAMESPACE, name, within=30)
        finally:
            await sampler.stop()
        assert sampler.samples > 10 and sampler.seen == set(), (sampler.samples, sampler.seen)


async def _equals(value: Any, expected: str) -> bool:
    return bool(await value == expected)


def elastic_raycluster(name: str, workers: int) -> Obj:
    """An elastic RayCluster as the manager's webhook leaves it: managed by MultiKueue, its Pods gated."""

    def template(container: str) -> Obj:
        resources = {"requests": {"cpu": "1"}}
        spec = {"containers": [{"name": container, "image": "rayproject/ray:2.41.0", "resources": resources}]}
        return {"spec": {**spec, "schedulingGates": [{"name": GATE}]}}

    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
            "annotations": {ELASTIC: "true"},
        },
        "spec": {
            "suspend": True,
            "managedBy": MULTIKUEUE,
            "headGroupSpec": {"rayStartParams": {}, "template": template("head")},
            "workerGroupSpecs": [
                {
                    "groupName": "workers",
                    "replicas": workers,
                    "minReplicas": 0,
                    "maxReplicas": 4,
                    "rayStartParams": {},
                    "template": template("worker"),
                }
            ],
        },
    }


async def test_an_elastic_raycluster_scaled_on_the_manager_is_resized_on_its_worker() -> None:
    async with multikueue_env(
        {"worker1": 4, "worker2": 8},
        kadmit_on_workers=True,
        kadmit_on_manager=True,
        frameworks=("batch/job", "ray.io/raycluster"),
    ) as env:
        worker1, manager = env.workers["worker1"], env.manager
        created = await manager.create(RAY_CLUSTERS, elastic_raycluster("serve", workers=1))
        uid = created["metadata"]["uid"]
        first = await manager.wait_for(
            WORKLOADS, NAMESPACE, None, lambda w: owned_by(w, uid) and has_state(CHECK, "Ready")(w), within=60
        )
        first_name = first["metadata"]["name"]

        def ready(workers: int) -> Any:
            def check(rc: Obj) -> bool:
                status = rc.get("status") or {}
                return status.get("state") == "ready" and status.get("readyWorkerReplicas") == workers

            return check

        copy_ = await worker1.wait_for(RAY_CLUSTERS, NAMESPACE, "serve", ready(1), within=60)
        await env.add_worker("worker2")
        sampler = NothingOn(env.workers["worker2"], kinds=(WORKLOADS, RAY_CLUSTERS))
        try:
            groups = created["spec"]["workerGroupSpecs"]
            await manager.api.patch(
                RAY_CLUSTERS,
                NAMESPACE,
                "serve",
                {"spec": {"workerGroupSpecs": [{**groups[0], "replicas": 2}]}},
            )
            second = await manager.wait_for(
                WORKLOADS,
                NAMESPACE,
                None,
                lambda w: (
                    owned_by(w, uid)
                    and (w["metadata"].get("annotations") or {}).get(REPLACEMENT_FOR)
                    == f"{NAMESPACE}/{first_name}"
                    and is_true(w, "Admitted")
                ),
                within=60,
            )
            assert second["status"]["clusterName"] == CLUSTER_NAME["worker1"]
            grown = await worker1.wait_for(RAY_CLUSTERS, NAMESPACE, "serve", ready(2), within=60)
            assert grown["metadata"]["uid"] == copy_["metadata"]["uid"]
            assert grown["spec"]["workerGroupSpecs"][0]["replicas"] == 2
            assert grown["metadata"]["annotations"][PREBUILT_WORKLOAD] == second["metadata"]["name"]
            await eventually(lambda: _equals(reserved_cpu(worker1), "3"), 30, "3 cpu reserved on worker1")

            await manager.api.patch(
                RAY_CLUSTERS,
                NAMESPACE,
                "serve",
                {"spec": {"workerGroupSpecs": [{**groups[0], "replicas": 0}]}},
            )
            shrunk = await worker1.wait_for(RAY_CLUSTERS, NAMESPACE, "serve", ready(0), within=60)
            assert shrunk["metadata"]["uid"] == copy_["metadata"]["uid"]
            await eventually(lambda: _equals(reserved_cpu(worker1), "1"), 30, "1 cpu reserved on worker1")
            await eventually(lambda: _equals(reserved_cpu(manager), "1"), 30, "1 cpu reserved on the manager")
            current = await manager.get(WORKLOADS, NAMESPACE, second["metadata"]["name"])
            assert has_state(CHECK, "Ready")(current) and not is_true(current, "Finished")

            # A serving RayCluster ends when its user deletes it: the copy and both slices' copies go.
            await manager.api.delete(RAY_CLUSTERS, NAMESPACE, "serve")
            await worker1.wait_gone(RAY_CLUSTERS, NAMESPACE, "serve", within=30)
            for name in (first_name, second["metadata"]["name"]):
                await manager.wait_gone(WORKLOADS, NAMESPACE, name, within=30)
                await worker1.wait_gone(WORKLOADS, NAMESPACE, name, within=30)
        finally:
            await sampler.stop()
        assert sampler.samples > 10 and sampler.seen == set(), (sampler.samples, sampler.seen)


async def test_a_new_slice_waits_for_its_worker_across_a_disconnect_and_a_manager_restart() -> None:
    """The elastic Job runs on one of two workers; that worker's link is cut, the Job is scaled up
    on the manager, and kadmit on the manager restarts during the disconnect: the new slice, its
    quota reserved on the manager, waits for that worker (never dispatched to the other one, which
    has room), and once the link heals it is admitted there and the copy grows. Every store event
    of both workers is sampled: the Job never starts on the other worker."""
    from tests.chaos.partitions import Partition, Runs, route_through
    from tests.checks.test_multikueue_kinds import active

    async with multikueue_env(
        {"worker1": 4, "worker2": 4},
        kadmit_on_workers=True,
        kadmit_on_manager=True,
        worker_lost_timeout=60.0,
    ) as env:
        await env.add_worker("worker2")
        runs = Runs()
        partitions: dict[str, Partition] = {}
        samplers: list[NothingOn] = []
        try:
            for worker in ("worker1", "worker2"):
                runs.watch(worker, env.clusters.workers[worker])
                partitions[worker] = Partition(env.clusters.workers[worker].port)
                await partitions[worker].start()
                await route_through(env, worker, partitions[worker], f"{worker}-secret")
            for worker in ("worker1", "worker2"):
                await env.manager.wait_for(
                    MULTIKUEUE_CLUSTERS, None, CLUSTER_NAME[worker], active("True"), within=30
                )
            created = await env.manager.create(JOBS, elastic_job("elastic", parallelism=2))
            uid = created["metadata"]["uid"]
            first = await env.manager.wait_for(
                WORKLOADS,
                NAMESPACE,
                None,
                lambda w: owned_by(w, uid) and has_state(CHECK, "Ready")(w),
                within=60,
            )
            first_name = first["metadata"]["name"]
            winner = next(w for w, c in CLUSTER_NAME.items() if c == first["status"]["clusterName"])
            other = "worker2" if winner == "worker1" else "worker1"
            runs_on = env.workers[winner]
            copy_ = await runs_on.wait_for(
                JOBS, NAMESPACE, "elastic", lambda j: j["spec"].get("suspend") is False, within=30
            )
            await env.workers[other].wait_gone(WORKLOADS, NAMESPACE, first_name, within=30)
            samplers = [NothingOn(env.workers[other], kinds=(JOBS,)), NothingOn(env.workers[other])]

            partitions[winner].cut()
            await env.manager.wait_for(
                MULTIKUEUE_CLUSTERS, None, CLUSTER_NAME[winner], active("False"), within=30
            )
            await env.manager.api.patch(JOBS, NAMESPACE, "elastic", {"spec": {"parallelism": 3}})

            def waiting(w: Obj) -> bool:
                return (
                    replacing(uid, first_name)(w)
                    and is_true(w, "QuotaReserved")
                    and "where the elastic job runs, to be connected"
                    in str(next(iter(w["status"].get("admissionChecks") or [{}])).get("message"))
                )

            second = await env.manager.wait_for(WORKLOADS, NAMESPACE, None, waiting, within=60)
            second_name = second["metadata"]["name"]
            assert second["status"]["clusterName"] == CLUSTER_NAME[winner]
            await env.restart_manager()
            for _ in range(10):  # sampled every 0.3 s while cut off: still waiting for its worker
                await asyncio.sleep(0.3)
                current = await env.manager.get(WORKLOADS, NAMESPACE, second_name)
                assert current["status"]["clusterName"] == CLUSTER_NAME[winner]
                assert not is_true(current, "Admitted")
            assert second_name not in samplers[1].seen

            partitions[winner].heal()
            admitted = await env.manager.wait_for(
                WORKLOADS, NAMESPACE, second_name, lambda w: is_true(w, "Admitted"), within=60
            )
            assert admitted["status"]["clusterName"] == CLUSTER_NAME[winner]
            grown = await runs_on.wait_for(
                JOBS,
                NAMESPACE,
                "elastic",
                lambda j: (
                    j["spec"].get("parallelism") == 3
                    and j["metadata"]["annotations"].get(PREBUILT_WORKLOAD) == second_name
                ),
                within=30,
            )
            assert grown["metadata"]["uid"] == copy_["metadata"]["uid"]
            assert (
                len(await eventually(lambda: running_pods(runs_on, grown["metadata"]["uid"]), 60, "3 pods"))
                == 3
            )
        finally:
            for sampler in samplers:
                await sampler.stop()
            for partition in partitions.values():
                await partition.stop()
        assert samplers[0].samples > 10 and samplers[0].seen == set(), samplers[0].seen
        assert second_name not in samplers[1].seen, samplers[1].seen
        assert {w for workers in runs.started.values() for w in workers} == {winner}, runs.started


async def test_a_new_slice_deactivated_before_its_worker_admits_it_stops_the_jobs_copy() -> None:
    """Scaled up beyond what its worker has room for, the new slice waits there while the job runs
    at its old size under the old slice's copy; deactivated on the manager, the job stops: its copy
    and every Workload copy leave the worker (none keeps running unseen by the manager)."""
    async with multikueue_env({"worker1": 2}, kadmit_on_workers=True, kadmit_on_manager=True) as env:
        worker1, manager = env.workers["worker1"], env.manager
        created = await manager.create(JOBS, elastic_job("elastic", parallelism=2))
        uid = created["metadata"]["uid"]
        first = await manager.wait_for(
            WORKLOADS, NAMESPACE, None, lambda w: owned_by(w, uid) and has_state(CHECK, "Ready")(w), within=60
        )
        first_name = first["metadata"]["name"]
        copy_ = await worker1.wait_for(
            JOBS, NAMESPACE, "elastic", lambda j: j["spec"].get("suspend") is False, within=30
        )
        await manager.api.patch(JOBS, NAMESPACE, "elastic", {"spec": {"parallelism": 3}})

        new_slice = replacing(uid, first_name)

        second = await manager.wait_for(
            WORKLOADS, NAMESPACE, None, lambda w: new_slice(w) and is_true(w, "QuotaReserved"), within=60
        )
        second_name = second["metadata"]["name"]
        # It waits on worker1 (no room for the delta); the job runs on there at 2, under the old slice.
        await worker1.wait_for(
            WORKLOADS, NAMESPACE, second_name, lambda w: not is_true(w, "QuotaReserved"), within=30
        )
        running = await worker1.get(JOBS, NAMESPACE, "elastic")
        assert running["metadata"]["uid"] == copy_["metadata"]["uid"]
        assert running["spec"]["parallelism"] == 2 and running["spec"]["suspend"] is False
        assert running["metadata"]["annotations"][PREBUILT_WORKLOAD] == first_name

        await manager.api.patch(WORKLOADS, NAMESPACE, second_name, {"spec": {"active": False}})
        await worker1.wait_gone(JOBS, NAMESPACE, "elastic", within=30)
        for name in (first_name, second_name):
            await worker1.wait_gone(WORKLOADS, NAMESPACE, name, within=30)
        stopped = await manager.wait_for(
            JOBS, NAMESPACE, "elastic", lambda j: j["spec"].get("suspend") is True, within=30
        )
        assert stopped["spec"]["parallelism"] == 3
