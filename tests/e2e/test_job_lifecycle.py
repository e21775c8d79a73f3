"""A Job goes suspended → Workload → admitted → started on the flavor's nodes → Complete → quota released."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from kadmit.controller.jobs.construct import FINALIZER
from kadmit.controller.manager import Manager
from kadmit.kube.resources import CLUSTER_QUEUES, EVENTS, JOBS, LOCAL_QUEUES, PODS, WORKLOADS, Resource
from tests.e2e.conftest import MANIFESTS, Env, eventually, fast_config
from tests.e2e.helpers import condition, job, workload_of

Obj = dict[str, Any]


async def test_job_runs_on_the_flavor_nodes_and_releases_its_quota(env: Env) -> None:
    manager = await env.start_manager()
    await env.apply_file(MANIFESTS / "samples" / "local-setup.yaml")
    # It runs long enough to be seen running in the queues' status, written at most once a second.
    await env.kube.create(JOBS, job("sample", cpu="1", parallelism=2, runtime="2s"))

    wl = await eventually(lambda: workload_of(env, "sample"), what="the Workload")
    assert wl["metadata"]["name"].startswith("job-sample-")
    assert wl["spec"]["podSets"][0]["count"] == 2

    async def admitted() -> Obj | None:
        current = await workload_of(env, "sample")
        return current if current and condition(current, "Admitted") == "True" else None

    wl = await eventually(admitted, what="admission")
    assert wl["status"]["admission"]["clusterQueue"] == "cluster-queue"
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"] == "cpu"

    async def started() -> Obj | None:
        current = await env.kube.get(JOBS, "default", "sample")
        return current if current["spec"].get("suspend") is False else None

    started_job = await eventually(started, what="the Job's start")

    async def queue_counts() -> Obj | None:
        cq = await env.kube.get(CLUSTER_QUEUES, None, "cluster-queue")
        status = cq.get("status") or {}
        return cq if status.get("admittedWorkloads") == 1 else None

    cq = await eventually(queue_counts, what="ClusterQueue status counting the admitted Workload")
    assert cq["status"]["reservingWorkloads"] == 1 and cq["status"]["pendingWorkloads"] == 0
    cpu_flavor = next(f for f in cq["status"]["flavorsUsage"] if f["name"] == "cpu")
    assert {"name": "cpu", "total": "2", "borrowed": "0"} in cpu_flavor["resources"]
    assert [c["reason"] for c in cq["status"]["conditions"] if c["type"] == "Active"] == ["Ready"]

    async def local_queue_counts() -> Obj | None:
        lq = await env.kube.get(LOCAL_QUEUES, "default", "default")
        return lq if (lq.get("status") or {}).get("admittedWorkloads") == 1 else None

    lq = await eventually(local_queue_counts, what="LocalQueue status counting the admitted Workload")
    assert [c["status"] for c in lq["status"]["conditions"] if c["type"] == "Active"] == ["True"]
    template = started_job["spec"]["template"]
    assert template["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"}
    assert template["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "main"
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == wl["metadata"]["name"]

    async def complete() -> Obj | None:
        current = await env.kube.get(JOBS, "default", "sample")
        return current if condition(current, "Complete") == "True" else None

    await eventually(complete, what="the Job's completion")
    selector = "batch.kubernetes.io/job-name=sample"
    pods = (await env.kube.list(PODS, "default", label_selector=selector))["items"]
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["nodeName"].startswith("cpu-")

    async def finished() -> Obj | None:
        current = await workload_of(env, "sample")
        done = current and condition(current, "Finished") == "True"
        return current if done and not current["metadata"].get("finalizers") else None

    wl = await eventually(finished, what="the Workload Finished and its finalizer removed")
    assert [c["reason"] for c in wl["status"]["conditions"] if c["type"] == "Finished"] == ["Succeeded"]
    await eventually(lambda: _no_usage(manager), what="quota release")

    async def queue_empty() -> bool:
        status = (await env.kube.get(CLUSTER_QUEUES, None, "cluster-queue")).get("status") or {}
        return status.get("admittedWorkloads") == 0 and status.get("reservingWorkloads") == 0

    await eventually(queue_empty, what="ClusterQueue status back to no reservations")


async def _no_usage(manager: Any) -> bool:
    return not any(manager.engine.usage("cluster-queue").values())


async def test_a_gpu_job_gets_the_gpu_flavor_its_toleration_and_gpu_nodes(env: Env) -> None:
    await env.start_manager()
    await env.apply_file(MANIFESTS / "samples" / "local-setup.yaml")
    await env.kube.create(JOBS, job("trainer", cpu="2", parallelism=2, gpu=1))

    async def complete() -> Obj | None:
        current = await env.kube.get(JOBS, "default", "trainer")
        return current if condition(current, "Complete") == "True" else None

    done = await eventually(complete, what="the GPU Job's completion")
    spec = done["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"kadmit.dev/pool": "gpu"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    selector = "batch.kubernetes.io/job-name=trainer"
    pods = (await env.kube.list(PODS, "default", label_selector=selector))["items"]
    assert pods and all(p["spec"]["nodeName"].startswith("gpu-") for p in pods)
    wl = await workload_of(env, "trainer")
    assert wl is not None
    assert set(wl["status"]["admission"]["podSetAssignments"][0]["flavors"].values()) == {"gpu"}


async def test_deleting_a_running_job_releases_its_workload_and_quota(env: Env) -> None:
    manager = await env.start_manager()
    await env.apply_file(MANIFESTS / "samples" / "local-setup.yaml")
    await env.kube.create(JOBS, job("doomed", cpu="2", parallelism=2, runtime="30s"))

    async def running() -> bool:
        return (await env.kube.get(JOBS, "default", "doomed"))["spec"].get("suspend") is False

    await eventually(running, what="the Job running")
    assert any(manager.engine.usage("cluster-queue").values())
    await env.kube.delete(JOBS, "default", "doomed", propagation_policy="Background")

    async def gone() -> bool:
        return await workload_of(env, "doomed") is None

    await eventually(gone, what="the Workload gone with its Job (finalizer released)")
    await eventually(lambda: _no_usage(manager), what="quota released")


async def test_events_tell_the_story(env: Env) -> None:
    await env.start_manager()
    await env.apply_file(MANIFESTS / "samples" / "local-setup.yaml")
    await env.kube.create(JOBS, job("storied", cpu="1", parallelism=1))

    async def reasons() -> set[str] | None:
        found = {e["reason"] for e in (await env.kube.list(EVENTS, "default"))["items"]
                 if e["source"].get("component") == "kadmit-controller-manager"}
        wanted = {"CreatedWorkload", "QuotaReserved", "Admitted", "Started", "FinishedWorkload"}
        return found if wanted <= found else None

    await eventually(reasons, what="kadmit's events for the Job and its Workload")


async def test_cpu_jobs_spill_over_to_the_gpu_flavor_when_the_cpu_flavor_is_full(env: Env) -> None:
    await env.start_manager()
    await env.apply_file(MANIFESTS / "samples" / "local-setup.yaml")

    async def flavor_of(name: str) -> str | None:
        wl = await workload_of(env, name)
        if wl is None or condition(wl, "QuotaReserved") != "True":
            return None
        return str(wl["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"])

    for name in ("fill-a", "fill-b"):  # 16 CPUs each: the cpu flavor's 32
        await env.kube.create(JOBS, job(name, cpu="2", parallelism=8, runtime="30s"))
        assert await eventually(lambda n=name: flavor_of(n), what=f"{name} reserved") == "cpu"  # type: ignore[misc]
    await env.kube.create(JOBS, job("spill", cpu="2", parallelism=1, runtime="30s"))
    assert await eventually(lambda: flavor_of("spill"), what="spill reserved") == "gpu"


async def owner_gone_workload_let_go(env: Env, manager: Manager, owner: Obj, resource: Resource,
                                     cached: Callable[[], Obj | None],
                                     reconcile: Callable[[], Awaitable[None]]) -> None:
    """Create ``owner`` and a Workload it controls (with kadmit's finalizer) on a manager whose
    caches alone run, delete the owner, and once ``cached`` says the owner is gone and the
    Workload is being deleted, run the owner's ``reconcile``: the Workload must then be let go.
    Without it, nothing else would: no Workload reconciler runs."""
    created = await env.kube.create(resource, owner)
    name = created["metadata"]["name"]
    reference = {"apiVersion": created["apiVersion"], "kind": created["kind"], "name": name,
                 "uid": created["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    await env.kube.create(WORKLOADS, {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": f"owned-by-{name}", "namespace": "default", "finalizers": [FINALIZER],
                     "ownerReferences": [reference]},
        "spec": {"queueName": "default", "podSets": [
            {"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}]},
    })
    await env.kube.delete(resource, "default", name, propagation_policy="Background")

    async def owner_gone_and_workload_deleting() -> bool:
        wl = manager.workloads.get("default", f"owned-by-{name}")
        return cached() is None and wl is not None and bool(wl["metadata"].get("deletionTimestamp"))

    await eventually(owner_gone_and_workload_deleting, what="the owner gone and its Workload being deleted")
    await reconcile()

    async def workload_gone() -> bool:
        return await env.kube.get_or_none(WORKLOADS, "default", f"owned-by-{name}") is None

    await eventually(workload_gone, within=10, what="the Workload let go by the owner's reconciler")


async def test_a_job_gone_lets_its_workload_go_whichever_watch_tells_kadmit_first(env: Env) -> None:
    """kadmit's Job and Workload watches are separate streams: the garbage collector's deletion of
    a Workload can be applied before its Job's own deletion, and the Workload reconciler then
    still finds the owner. The Job reconciler, finding the Job gone, finishes its Workloads and
    drops kadmit's finalizer itself (as Kueue's does for a job not found)."""
    manager = Manager(await env.kadmit_client(), fast_config())
    await manager.start_caches()  # the caches only: the one reconcile that runs is the test's
    try:
        reconciler = next(r for r in manager.job_reconcilers if r.integration.kind == "Job")
        await owner_gone_workload_let_go(
            env, manager, job("orphan", parallelism=1), JOBS,
            lambda: reconciler.jobs.get("default", "orphan"),
            lambda: reconciler.reconcile("default", "orphan"))
    finally:
        await manager.stop()


async def test_a_plain_pod_gone_lets_its_workload_go_whichever_watch_tells_kadmit_first(env: Env) -> None:
    """As for a Job: a Pod whose finalizer someone else took off is gone at once, the garbage
    collector deletes its Workload, and the Workload reconciler may see that deletion while the
    Pod is still in its cache. The group reconciler, finding the Pod gone, drops kadmit's
    finalizer from the Workload the Pod controlled."""
    manager = Manager(await env.kadmit_client(), fast_config(frameworks=("batch/job", "pod")))
    await manager.start_caches()  # the caches only: the one reconcile that runs is the test's
    try:
        reconciler = next(r for r in manager.group_reconcilers if r.integration.kind == "Pod")
        lone = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "lone", "namespace": "default",
                             "labels": {"kueue.x-k8s.io/queue-name": "default"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}],
                         "terminationGracePeriodSeconds": 0}}
        await owner_gone_workload_let_go(
            env, manager, lone, PODS, lambda: reconciler.members.get("default", "lone"),
            lambda: reconciler.reconcile("default", "lone"))
    finally:
        await manager.stop()


async def test_finished_workloads_are_deleted_after_the_retention_period(env: Env) -> None:
    await env.start_manager(dataclasses.replace(fast_config(), delete_finished_workloads_after=0.5))
    await env.apply_file(MANIFESTS / "samples" / "local-setup.yaml")
    await env.kube.create(JOBS, job("brief", cpu="1", parallelism=1))

    async def complete() -> bool:
        return condition(await env.kube.get(JOBS, "default", "brief"), "Complete") == "True"

    await eventually(complete, what="the Job's completion")

    async def gone() -> bool:
        return await workload_of(env, "brief") is None

    await eventually(gone, what="the Finished Workload deleted after 0.5 s")
    assert condition(await env.kube.get(JOBS, "default", "brief"), "Complete") == "True"  # the Job stays
