"""A JobSet goes the way a Job does: suspended by kadmit's webhook, one Workload with a pod set per
replicated job admitted as a gang, started with every template injected, run by the local
cluster's JobSet controller (a default add-on) and finished when the JobSet completes.

The ``kadmit`` fixture is ``kadmit local`` in-process (same CRDs, webhooks and configuration),
which manages JobSets because the local cluster serves them."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kadmit.controller import local_setup
from kadmit.controller.apply import Applier, load_documents
from kadmit.kube import ApiError, Resource
from kadmit.kube.resources import CLUSTER_QUEUES, JOBS, JOBSETS, PODS, WORKLOADS
from tests.e2e.conftest import MANIFESTS, Env, WebhookEnv, eventually, fast_config
from tests.e2e.helpers import apply_small_setup, condition_of, job

Obj = dict[str, Any]
FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset")


def replicated_job(name: str, replicas: int, parallelism: int, cpu: str = "500m",
                   runtime: str = "200ms") -> Obj:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": parallelism,
                "completions": parallelism,
                "template": {
                    "metadata": {"annotations": {"localcluster.kadmit.dev/runtime": runtime}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "main",
                                "image": "busybox",
                                "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}},
                            }
                        ],
                    },
                },
            }
        },
    }


def jobset(name: str, *replicated: Obj, queue: str = "small") -> Obj:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"replicatedJobs": list(replicated)},
    }


def true(obj: Obj, kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == kind and c["status"] == "True" for c in conditions)


async def test_jobset_is_suspended_admitted_as_one_gang_and_finishes(kadmit: WebhookEnv) -> None:
    kube = kadmit.kube
    await apply_small_setup(kube)
    created = await kube.create(
        JOBSETS, jobset("training", replicated_job("driver", 1, 1), replicated_job("workers", 2, 2))
    )
    assert created["spec"]["suspend"] is True  # by the mutating webhook mjobset.kb.io

    async def workload() -> Obj | None:
        for wl in (await kube.list(WORKLOADS, "default"))["items"]:
            if wl["metadata"]["name"].startswith("jobset-training-"):
                return wl  # type: ignore[no-any-return]
        return None

    wl = await eventually(workload, what="the JobSet's Workload")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("driver", 1), ("workers", 4)]

    async def completed() -> Obj | None:
        js = await kube.get(JOBSETS, "default", "training")
        return js if true(js, "Completed") else None

    js = await eventually(completed, what="the JobSet Completed by the JobSet controller")
    assert js["spec"]["suspend"] is False
    succeeded = {s["name"]: s["succeeded"] for s in js["status"]["replicatedJobsStatus"]}
    assert succeeded == {"driver": 1, "workers": 2}
    for rj in js["spec"]["replicatedJobs"]:
        template = rj["template"]["spec"]["template"]
        assert template["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"}
        assert template["metadata"]["labels"]["kueue.x-k8s.io/podset"] == rj["name"]

    jobs = (await kube.list(JOBS, "default"))["items"]
    children = [j for j in jobs if j["metadata"]["name"].startswith("training-")]
    assert sorted(j["metadata"]["name"] for j in children) == ["training-driver-0", "training-workers-0",
                                                              "training-workers-1"]
    for child in children:
        assert child["metadata"]["ownerReferences"][0]["kind"] == "JobSet"
        assert child["spec"]["template"]["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"}
    selector = "jobset.sigs.k8s.io/jobset-name=training"
    pods = (await kube.list(PODS, "default", label_selector=selector))["items"]
    assert len(pods) == 5
    assert all(p["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"} for p in pods)
    assert all(p["spec"]["nodeName"].startswith("cpu-") and p["status"]["phase"] == "Succeeded" for p in pods)

    admitted = await workload()
    assert admitted is not None
    assignments = admitted["status"]["admission"]["podSetAssignments"]
    usage = {p["name"]: p["resourceUsage"]["cpu"] for p in assignments}
    assert usage == {"driver": "500m", "workers": "2"}

    async def finished() -> Obj | None:
        current = await workload()
        return current if current and true(current, "Finished") else None

    await eventually(finished, what="the Workload Finished with the JobSet")
    # the child Jobs are the JobSet's: kadmit made no Workload of their own
    assert len((await kube.list(WORKLOADS, "default"))["items"]) == 1

    async def released() -> bool:
        status = (await kube.get(CLUSTER_QUEUES, None, "small")).get("status") or {}
        flavors = {f["name"]: f for f in status.get("flavorsUsage") or []}
        used = {r["name"]: r["total"] for r in (flavors.get("cpu") or {}).get("resources") or []}
        return status.get("admittedWorkloads") == 0 and used.get("cpu") == "0"

    await eventually(released, what="the ClusterQueue's quota released")


async def test_a_preempted_jobset_is_suspended_restored_and_readmitted(kadmit: WebhookEnv) -> None:
    """A running low-priority JobSet makes room for a high-priority Job, as a Kueue Job would."""
    kube = kadmit.kube
    await apply_small_setup(kube)
    low = jobset("low", replicated_job("driver", 1, 1, cpu="1", runtime="1500ms"),
                 replicated_job("workers", 2, 1, cpu="1", runtime="1500ms"))  # 3 of the queue's 4 cpu
    low["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "low"
    created = await kube.create(JOBSETS, low)
    original = {rj["name"]: rj["template"] for rj in created["spec"]["replicatedJobs"]}
    assert original == {rj["name"]: rj["template"] for rj in low["spec"]["replicatedJobs"]}
    selector = "jobset.sigs.k8s.io/jobset-name=low"

    async def workload() -> Obj | None:
        for wl in (await kube.list(WORKLOADS, "default"))["items"]:
            if wl["metadata"]["name"].startswith("jobset-low-"):
                return wl  # type: ignore[no-any-return]
        return None

    async def children() -> list[Obj]:
        jobs = (await kube.list(JOBS, "default", label_selector=selector))["items"]
        return sorted(jobs, key=lambda j: str(j["metadata"]["name"]))

    async def running() -> list[Obj] | None:
        pods = (await kube.list(PODS, "default", label_selector=selector))["items"]
        return pods if len(pods) == 3 and all(p["status"].get("phase") == "Running" for p in pods) else None

    pods = await eventually(running, what="the low JobSet's pods running")
    assert all(p["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"} for p in pods)
    first_run = {p["metadata"]["uid"] for p in pods}

    # It runs long enough that the suspended JobSet can be seen before it is re-admitted.
    await kube.create(JOBS, job("high", cpu="1", parallelism=2, runtime="1500ms", queue="small",
                                priority_class="high"))

    async def preempted() -> Obj | None:
        wl = await workload()
        return wl if wl is not None and true(wl, "Preempted") else None

    victim = await eventually(preempted, what="the JobSet's Workload preempted")
    evicted = condition_of(victim, "Evicted")
    assert evicted is not None and evicted["status"] == "True" and evicted["reason"] == "Preempted", evicted
    reason = condition_of(victim, "Preempted")
    assert reason is not None and reason["reason"] == "InClusterQueue", reason

    async def stopped() -> Obj | None:
        js = await kube.get(JOBSETS, "default", "low")
        annotations = js["metadata"].get("annotations") or {}
        if js["spec"].get("suspend") is not True or "kueue.x-k8s.io/stopping" in annotations:
            return None
        jobs = await children()
        if len(jobs) != 3 or not all(j["spec"]["suspend"] is True for j in jobs):
            return None
        if (await kube.list(PODS, "default", label_selector=selector))["items"]:
            return None
        # The JobSet controller reports Suspended after it has stopped the children, on its own
        # next pass: wait for the status too instead of asserting it the moment the spec says so.
        return js if true(js, "Suspended") else None

    js = await eventually(stopped, what="the JobSet and its Jobs suspended, their pods gone, Suspended")
    restored = {rj["name"]: rj["template"] for rj in js["spec"]["replicatedJobs"]}
    assert restored == original  # the flavor's nodeSelector (and podset label) taken back

    async def high_done() -> bool:
        return true(await kube.get(JOBS, "default", "high"), "Complete")

    await eventually(high_done, what="the high-priority Job complete")

    async def readmitted() -> Obj | None:
        wl = await workload()
        admitted = wl is not None and true(wl, "Admitted") and condition_of(wl, "Evicted")
        return wl if admitted and admitted["status"] == "False" else None

    wl = await eventually(readmitted, what="the JobSet's Workload re-admitted")
    requeued = condition_of(wl, "Requeued")
    assert requeued is not None and requeued["status"] == "True", requeued

    async def resumed() -> list[Obj] | None:
        jobs = await children()
        return jobs if len(jobs) == 3 and not any(j["spec"]["suspend"] for j in jobs) else None

    for child in await eventually(resumed, what="the child Jobs resumed"):
        assert child["spec"]["template"]["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"}

    async def completed() -> Obj | None:
        js = await kube.get(JOBSETS, "default", "low")
        return js if true(js, "Completed") else None

    js = await eventually(completed, what="the JobSet Completed after re-admission")
    succeeded = {s["name"]: s["succeeded"] for s in js["status"]["replicatedJobsStatus"]}
    assert succeeded == {"driver": 1, "workers": 2}
    pods = (await kube.list(PODS, "default", label_selector=selector))["items"]
    assert len(pods) == 3 and not first_run & {p["metadata"]["uid"] for p in pods}  # run again, from scratch
    assert all(p["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"} for p in pods)
    assert all(p["status"]["phase"] == "Succeeded" for p in pods)


async def test_a_user_cannot_unsuspend_an_unadmitted_jobset(kadmit: WebhookEnv) -> None:
    kube = kadmit.kube
    await apply_small_setup(kube)
    too_big = jobset("too-big", replicated_job("workers", 2, 2, cpu="2"))  # 8 cpu, the queue has 4
    too_big["spec"]["suspend"] = False  # the mutating webhook suspends it anyway
    assert (await kube.create(JOBSETS, too_big))["spec"]["suspend"] is True

    async def pending() -> Obj | None:
        for wl in (await kube.list(WORKLOADS, "default"))["items"]:
            if wl["metadata"]["name"].startswith("jobset-too-big-") and true(wl, "QuotaReserved") is False:
                return wl  # type: ignore[no-any-return]
        return None

    await eventually(pending, what="the JobSet's Workload, pending")
    with pytest.raises(ApiError) as denied:
        await kube.patch(JOBSETS, "default", "too-big", {"spec": {"suspend": False}})
    assert denied.value.status in (400, 403)
    assert "JobSet default/too-big cannot be unsuspended" in denied.value.message
    assert (await kube.get(JOBSETS, "default", "too-big"))["spec"]["suspend"] is True
    jobs = (await kube.list(JOBS, "default"))["items"]
    assert all(j["spec"]["suspend"] is True for j in jobs if j["metadata"]["name"].startswith("too-big-"))


async def test_without_the_jobset_crd_the_integration_is_left_out(env: Env) -> None:
    crds = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    await env.kube.delete(crds, None, "jobsets.jobset.x-k8s.io")

    async def gone() -> bool:
        try:
            await env.kube.request("GET", JOBSETS.path(), query={"limit": 1})
        except ApiError as exc:
            return exc.not_found
        return False

    await eventually(gone, what="the JobSet API gone")
    config = dataclasses.replace(fast_config(), frameworks=FRAMEWORKS)
    manager = await env.start_manager(config)  # returns: it does not wait for a list that cannot work
    assert [i.kind for i in manager.integrations] == ["Job"]
    assert [r.integration.kind for r in manager.job_reconcilers] == ["Job"]


async def test_the_jobset_sample_completes_on_the_local_setup(kadmit: WebhookEnv) -> None:
    """``manifests/samples/jobset.yaml`` on ``kadmit local``'s sample queues, as the README shows it."""
    kube = kadmit.kube
    await local_setup.install_samples(kube)
    (created,) = await Applier(kube).apply_all(load_documents(MANIFESTS / "samples" / "jobset.yaml"))
    assert created["spec"]["suspend"] is True
    assert created["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"

    async def completed() -> Obj | None:
        js = await kube.get(JOBSETS, "default", "sample-jobset")
        return js if true(js, "Completed") else None

    js = await eventually(completed, what="the sample JobSet Completed")
    assert js["status"]["terminalState"] == "Completed"

    async def finished() -> Obj | None:
        for wl in (await kube.list(WORKLOADS, "default"))["items"]:
            if wl["metadata"]["name"].startswith("jobset-sample-jobset-") and true(wl, "Finished"):
                return wl  # type: ignore[no-any-return]
        return None

    wl = await eventually(finished, what="the sample's Workload Finished")
    assert wl["spec"]["queueName"] == "default"
    flavors = {a["name"]: a["flavors"]["cpu"] for a in wl["status"]["admission"]["podSetAssignments"]}
    assert flavors == {"driver": "cpu", "workers": "cpu"}
