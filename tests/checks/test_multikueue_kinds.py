"""MultiKueue for kinds other than the Job, kadmit on the manager and on both workers: a JobSet is
dispatched, admitted on exactly one worker, runs there (its status mirrored on the manager), and
its copies are removed from the worker once it finished; and it never runs on two workers, across
a disconnect and a restart of the manager."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from kadmit.checks.multikueue_remote import ORIGIN_LABEL, PREBUILT_WORKLOAD
from kadmit.kube import Resource
from kadmit.kube.resources import JOBSETS, MULTIKUEUE_CLUSTERS, WORKLOADS
from kadmit.workload import find_condition, is_true
from tests.checks.conftest import CRDS, JOBS, has_state
from tests.checks.multikueue_fixtures import CHECK, CLUSTER_NAME, NAMESPACE, multikueue_env

Obj = dict[str, Any]
FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset")
MULTIKUEUE = "kueue.x-k8s.io/multikueue"


def jobset(name: str, runtime: str = "0.5s") -> Obj:
    def replicated(rj: str, replicas: int) -> Obj:
        return {
            "name": rj,
            "replicas": replicas,
            "template": {
                "spec": {
                    "parallelism": 1,
                    "completions": 1,
                    "template": {
                        "metadata": {"annotations": {"localcluster.kadmit.dev/runtime": runtime}},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                            ],
                        },
                    },
                }
            },
        }

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
        },
        "spec": {
            "suspend": True,
            "managedBy": MULTIKUEUE,
            "replicatedJobs": [replicated("driver", 1), replicated("workers", 2)],
        },
    }


def completed(js: Obj) -> bool:
    return any(
        c.get("type") == "Completed" and c.get("status") == "True"
        for c in (js.get("status") or {}).get("conditions") or []
    )


async def test_a_jobset_runs_on_exactly_one_worker_its_status_comes_back_and_its_copies_go() -> None:
    async with multikueue_env(
        {"worker1": 0, "worker2": 4},
        kadmit_on_workers=True,
        kadmit_on_manager=True,
        frameworks=FRAMEWORKS,
    ) as env:
        await env.add_worker("worker2")
        created = await env.manager.create(JOBSETS, jobset("train"))
        uid = created["metadata"]["uid"]

        def owned(wl: Obj) -> bool:
            return any(ref.get("uid") == uid for ref in wl["metadata"].get("ownerReferences") or [])

        wl = await env.manager.wait_for(
            WORKLOADS, NAMESPACE, None, lambda w: owned(w) and has_state(CHECK, "Ready")(w), within=30
        )
        name = wl["metadata"]["name"]
        assert wl["status"]["clusterName"] == CLUSTER_NAME["worker2"]
        await env.workers["worker1"].wait_gone(WORKLOADS, NAMESPACE, name, within=10)

        # The copy on worker2: ours, the prebuilt Workload's, and run by the worker's JobSet controller.
        remote = await env.workers["worker2"].wait_for(
            JOBSETS, NAMESPACE, "train", lambda js: True, within=10
        )
        assert "managedBy" not in remote["spec"]
        assert remote["metadata"]["labels"][ORIGIN_LABEL] == "multikueue"
        assert remote["metadata"]["annotations"][PREBUILT_WORKLOAD] == name
        assert await env.workers["worker1"].listed(JOBSETS, NAMESPACE) == []

        # Its status comes back to the manager's JobSet, which the manager never runs itself.
        done = await env.manager.wait_for(JOBSETS, NAMESPACE, "train", completed, within=30)
        succeeded = {s["name"]: s["succeeded"] for s in done["status"]["replicatedJobsStatus"]}
        assert succeeded == {"driver": 1, "workers": 2}
        assert await env.manager.listed(JOBS, NAMESPACE) == []  # no child Job ran on the manager
        assert [w["metadata"]["name"] for w in await env.manager.listed(WORKLOADS, NAMESPACE)] == [name]
        finished = await env.manager.wait_for(
            WORKLOADS, NAMESPACE, name, lambda w: is_true(w, "Finished"), within=10
        )
        assert find_condition(finished, "Finished")["reason"] == "Succeeded"

        # Finished: the copies leave the worker.
        await env.workers["worker2"].wait_gone(JOBSETS, NAMESPACE, "train", within=15)
        await env.workers["worker2"].wait_gone(WORKLOADS, NAMESPACE, name, within=15)


async def test_a_jobset_never_runs_on_two_workers_across_a_disconnect_and_a_manager_restart() -> None:
    """The JobSet runs on one worker; the manager loses that worker (its link cut) and kadmit on the
    manager is restarted during the disconnect, with nothing in memory. Every store event of both
    workers is sampled: the JobSet is never started on the other worker, the restarted manager
    keeps the recorded winner, and once the link heals the JobSet completes where it ran."""
    from tests.chaos.partitions import Partition, Runs, route_through

    async with multikueue_env(
        {"worker1": 4, "worker2": 4},
        kadmit_on_workers=True,
        kadmit_on_manager=True,
        frameworks=FRAMEWORKS,
        worker_lost_timeout=60.0,
    ) as env:
        await env.add_worker("worker2")
        runs = Runs(kind=("jobset.x-k8s.io", "jobsets"))
        partitions: dict[str, Partition] = {}
        try:
            for worker in ("worker1", "worker2"):
                runs.watch(worker, env.clusters.workers[worker])
                partitions[worker] = Partition(env.clusters.workers[worker].port)
                await partitions[worker].start()
                await route_through(env, worker, partitions[worker], f"{worker}-secret")
            for worker in ("worker1", "worker2"):
                await env.manager.wait_for(
                    MULTIKUEUE_CLUSTERS, None, CLUSTER_NAME[worker], active("True"), within=20
                )
            created = await env.manager.create(JOBSETS, jobset("steady", runtime="6s"))
            uid = created["metadata"]["uid"]

            def owned(wl: Obj) -> bool:
                return any(ref.get("uid") == uid for ref in wl["metadata"].get("ownerReferences") or [])

            wl = await env.manager.wait_for(
                WORKLOADS, NAMESPACE, None, lambda w: owned(w) and has_state(CHECK, "Ready")(w), within=30
            )
            name = wl["metadata"]["name"]
            winner = next(w for w, cluster in CLUSTER_NAME.items() if cluster == wl["status"]["clusterName"])
            other = "worker2" if winner == "worker1" else "worker1"
            await env.workers[winner].wait_for(
                JOBSETS, NAMESPACE, "steady", lambda js: js["spec"].get("suspend") is False, within=20
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
            assert await env.workers[other].listed(JOBSETS, NAMESPACE) == []

            partitions[winner].heal()
            await env.manager.wait_for(
                MULTIKUEUE_CLUSTERS, None, CLUSTER_NAME[winner], active("True"), within=30
            )
            done = await env.manager.wait_for(JOBSETS, NAMESPACE, "steady", completed, within=40)
            assert done["status"]["replicatedJobsStatus"]
        finally:
            for partition in partitions.values():
                await partition.stop()
        assert runs.twice() == {}
        assert runs.started == {name: {winner}}
        assert await env.workers[other].listed(JOBSETS, NAMESPACE) == []


def active(status: str) -> Any:
    def check(mkc: Obj) -> bool:
        return any(
            c.get("type") == "Active" and c.get("status") == status
            for c in (mkc.get("status") or {}).get("conditions") or []
        )

    return check


MYJOBS = Resource("example.com", "v1", "myjobs", "MyJob")
MYJOB_CRD: Obj = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "myjobs.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "myjobs", "singular": "myjob", "kind": "MyJob", "listKind": "MyJobList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
        ],
    },
}


async def test_an_external_framework_is_dispatched_by_its_gvk_and_its_status_comes_back() -> None:
    """A kind kadmit does not know, named in multiKueue.externalFrameworks, installed after kadmit
    started: the generic adapter creates it on the winner without managedBy, copies its status
    back, and removes it once the Workload finished on the worker."""
    async with multikueue_env(
        {"worker1": 0, "worker2": 4},
        kadmit_on_workers=True,
        kadmit_on_manager=True,
        external_frameworks=("MyJob.v1.example.com",),
    ) as env:
        await env.add_worker("worker2")
        for kueue in (env.manager, *env.workers.values()):
            await kueue.api.create(CRDS, copy.deepcopy(MYJOB_CRD))
        await asyncio.sleep(0.5)  # the CRDs established
        local = await env.manager.create(
            MYJOBS,
            {
                "metadata": {"name": "custom", "namespace": NAMESPACE},
                "spec": {"managedBy": MULTIKUEUE, "size": 1},
            },
        )
        # The external framework's own integration makes its Workload; here the test does.
        await env.manager.create(
            WORKLOADS,
            {
                "metadata": {
                    "name": "myjob-custom",
                    "namespace": NAMESPACE,
                    "ownerReferences": [
                        {
                            "apiVersion": "example.com/v1",
                            "kind": "MyJob",
                            "name": "custom",
                            "uid": local["metadata"]["uid"],
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "queueName": "user-queue",
                    "podSets": [
                        {
                            "name": "main",
                            "count": 1,
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [
                                        {
                                            "name": "c",
                                            "image": "busybox",
                                            "resources": {"requests": {"cpu": "1"}},
                                        }
                                    ],
                                }
                            },
                        }
                    ],
                },
            },
        )
        wl = await env.manager.wait_for(
            WORKLOADS, NAMESPACE, "myjob-custom", has_state(CHECK, "Ready"), within=30
        )
        assert wl["status"]["clusterName"] == CLUSTER_NAME["worker2"]
        remote = await env.workers["worker2"].wait_for(MYJOBS, NAMESPACE, "custom", lambda o: True, within=10)
        assert remote["spec"] == {"size": 1}  # managedBy cleared: the worker's own controller runs it
        assert remote["metadata"]["labels"][ORIGIN_LABEL] == "multikueue"
        assert remote["metadata"]["annotations"][PREBUILT_WORKLOAD] == "myjob-custom"
        assert await env.workers["worker1"].listed(MYJOBS, NAMESPACE) == []

        # The worker's controller reports; the manager's object gets the status.
        remote["status"] = {"phase": "Running", "active": 1}
        await env.workers["worker2"].api.replace(MYJOBS, remote, subresource="status")
        await env.manager.wait_for(
            MYJOBS,
            NAMESPACE,
            "custom",
            lambda o: (o.get("status") or {}).get("phase") == "Running",
            within=10,
        )
        # Finished on the worker: finished on the manager, and the copies go.
        await env.workers["worker2"].set_condition(
            WORKLOADS,
            NAMESPACE,
            "myjob-custom",
            {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done"},
        )
        done = await env.manager.wait_for(
            WORKLOADS, NAMESPACE, "myjob-custom", lambda w: is_true(w, "Finished"), within=10
        )
        assert find_condition(done, "Finished")["reason"] == "Succeeded"
        await env.workers["worker2"].wait_gone(MYJOBS, NAMESPACE, "custom", within=15)


async def test_orphaned_copies_of_any_kind_are_collected() -> None:
    """A JobSet copy of ours whose manager Workload is gone (a deletion cut short) is collected,
    like a Job's; another origin's copy is not ours to remove."""
    async with multikueue_env(
        {"worker1": 4, "worker2": 0},
        kadmit_on_workers=True,
        kadmit_on_manager=True,
        frameworks=FRAMEWORKS,
        gc_interval=0.5,
    ) as env:
        worker = env.workers["worker1"]
        orphan = jobset("orphan")
        del orphan["spec"]["managedBy"]
        orphan["metadata"]["labels"] = {ORIGIN_LABEL: "multikueue", PREBUILT_WORKLOAD: "jobset-orphan-1"}
        orphan["metadata"]["annotations"] = {PREBUILT_WORKLOAD: "jobset-orphan-1"}
        await worker.create(JOBSETS, orphan)
        foreign = jobset("foreign")
        del foreign["spec"]["managedBy"]
        foreign["metadata"]["labels"] = {ORIGIN_LABEL: "another-manager"}
        foreign["metadata"]["annotations"] = {PREBUILT_WORKLOAD: "jobset-foreign-1"}
        await worker.create(JOBSETS, foreign)
        await worker.wait_gone(JOBSETS, NAMESPACE, "orphan", within=15)
        assert [js["metadata"]["name"] for js in await worker.listed(JOBSETS, NAMESPACE)] == ["foreign"]
