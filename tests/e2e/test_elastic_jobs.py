"""Elastic Jobs (``kueue.x-k8s.io/elastic-job: "true"``) through the API on a local cluster: a
running Job scaled down keeps running on the same admitted Workload, which takes the smaller
count in place, and the quota it gives back admits a waiting Job; scaled up, it keeps running
while a new Workload slice for its new size is admitted for the delta and replaces the old one,
its new pods held at their scheduling gate until then. An elastic RayCluster goes the same way."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from kadmit.controller.apply import Applier
from kadmit.kube.resources import CLUSTER_QUEUES, JOBS, PODS, RAY_CLUSTERS, WORKLOADS
from tests.e2e.conftest import Env, WebhookEnv, eventually
from tests.e2e.helpers import (
    Obj,
    apply_small_setup,
    condition,
    condition_of,
    is_running,
    is_stopped,
    job,
    wait_job,
    wait_workload,
    workload_of,
)
from tests.e2e.test_kueue_semantics import _cq, _flavor, _lq, _priority
from tests.e2e.test_ray import POOL, raycluster, templates_of_cluster, true


async def test_scaling_a_running_elastic_job_down_gives_quota_back(env: Env) -> None:
    await env.start_manager()
    await env.applier.apply_all([_flavor(), _cq("elastic", 4), _lq("elastic", "elastic")])
    big = job("big", cpu="1", parallelism=4, runtime="60s", queue="elastic")
    big["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    await env.kube.create(JOBS, big)
    await wait_job(env, "big", is_running, "admitted: 4 cpu of 4")
    admitted = await workload_of(env, "big")
    assert admitted is not None
    await env.kube.create(JOBS, job("next", cpu="1", parallelism=2, runtime="60s", queue="elastic"))
    await wait_workload(
        env, "next", lambda w: condition(w, "QuotaReserved") == "False", "waits: no quota left"
    )

    await env.kube.patch(JOBS, "default", "big", {"spec": {"parallelism": 2}})
    await wait_job(env, "next", is_running, "admitted with the 2 cpu big gave back", within=20)
    scaled = await workload_of(env, "big")
    assert scaled is not None
    assert scaled["metadata"]["uid"] == admitted["metadata"]["uid"], "the same Workload, not a new one"
    assert scaled["spec"]["podSets"][0]["count"] == 2
    assert condition(scaled, "Admitted") == "True"
    assert (await env.kube.get(JOBS, "default", "big"))["spec"]["suspend"] is False, "big keeps running"


REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"
SLICE_NAME = "kueue.x-k8s.io/workload-slice-name"
GATE = "kueue.x-k8s.io/elastic-job"


def _elastic(name: str, parallelism: int, completions: int) -> Obj:
    created = job(name, cpu="1", parallelism=parallelism, runtime="120s", queue="elastic")
    created["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    created["spec"]["completions"] = completions
    return created


def _owned_by(obj: Obj, name: str) -> bool:
    return any(r.get("name") == name for r in obj["metadata"].get("ownerReferences") or [])


async def _slices(env: WebhookEnv, job_name: str) -> list[Obj]:
    """The job's Workloads, oldest first (of two made in the same second, the replacement last)."""
    items = (await env.kube.list(WORKLOADS, "default"))["items"]
    owned = [w for w in items if _owned_by(w, job_name)]
    return sorted(
        owned,
        key=lambda w: (
            w["metadata"]["creationTimestamp"],
            REPLACEMENT_FOR in (w["metadata"].get("annotations") or {}),
        ),
    )


async def _pods(env: WebhookEnv, job_name: str) -> list[Obj]:
    """The job's pods that have not ended."""
    items = (await env.kube.list(PODS, "default"))["items"]
    return [
        p
        for p in items
        if _owned_by(p, job_name) and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]


def _gated(pod: Obj) -> bool:
    return {"name": GATE} in ((pod.get("spec") or {}).get("schedulingGates") or [])


async def _running(env: WebhookEnv, name: str, pods: int) -> list[Obj] | None:
    """The job's pods when it runs exactly ``pods`` of them, none gated, all bound to a node."""
    found = await _pods(env, name)
    if (
        len(found) == pods
        and not any(_gated(p) for p in found)
        and all(p["spec"].get("nodeName") for p in found)
    ):
        return found
    return None


async def _job_running(env: WebhookEnv, name: str) -> bool:
    return is_running(await env.kube.get(JOBS, "default", name))


class _NeverSuspended:
    """Samples a Job's ``spec.suspend`` in the background: it must never turn True."""

    def __init__(self, env: WebhookEnv, name: str) -> None:
        self.env, self.name, self.samples, self.suspended = env, name, 0, 0
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            current = await self.env.kube.get(JOBS, "default", self.name)
            self.samples += 1
            self.suspended += current["spec"].get("suspend") is True
            await asyncio.sleep(0.05)

    async def __aenter__(self) -> _NeverSuspended:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, *_: object) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        if kind is None:
            assert self.samples > 0 and self.suspended == 0, (self.samples, self.suspended)


async def _reserved_cpu(env: WebhookEnv, cluster_queue: str) -> str | None:
    cq = await env.kube.get(CLUSTER_QUEUES, None, cluster_queue)
    for flavor in (cq.get("status") or {}).get("flavorsReservation") or []:
        for resource in flavor["resources"]:
            if resource["name"] == "cpu":
                return str(resource["total"])
    return None


async def _replaced_total(env: WebhookEnv, cluster_queue: str) -> float:
    assert env.app is not None
    url = f"http://127.0.0.1:{env.app.metrics_port}/metrics"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        text = await response.text()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (
                sample.name == "kueue_replaced_workload_slices_total"
                and sample.labels.get("cluster_queue") == cluster_queue
            ):
                return float(sample.value)
    return 0.0


async def test_scaling_a_running_elastic_job_up_admits_a_new_slice_for_the_delta(kadmit: WebhookEnv) -> None:
    env = kadmit
    await Applier(env.kube).apply_all([_flavor(), _cq("elastic", 5), _lq("elastic", "elastic")])
    await env.kube.create(JOBS, _elastic("big", 2, 8))
    await eventually(lambda: _job_running(env, "big"), what="big admitted: 2 cpu of 5")
    [first] = await _slices(env, "big")
    assert first["metadata"]["annotations"][SLICE_NAME] == first["metadata"]["name"]
    created = await env.kube.get(JOBS, "default", "big")
    gates = created["spec"]["template"]["spec"].get("schedulingGates")
    assert gates == [{"name": GATE}], "the webhook gates an elastic Job's pods"
    before = await eventually(lambda: _running(env, "big", 2), what="big's 2 pods ungated and scheduled")

    # 4 cpu in all fit only as a delta: 2 more beside the 2 the first slice holds, in a 5-cpu queue
    async with _NeverSuspended(env, "big"):
        await env.kube.patch(JOBS, "default", "big", {"spec": {"parallelism": 4}})

        async def replaced() -> list[Obj] | None:
            slices = await _slices(env, "big")
            done = len(slices) == 2 and condition(slices[0], "Finished") == "True"
            return slices if done and condition(slices[1], "Admitted") == "True" else None

        old, new = await eventually(replaced, what="a new slice admitted and the old one finished")
        annotations = new["metadata"]["annotations"]
        assert annotations[REPLACEMENT_FOR] == f"default/{old['metadata']['name']}"
        assert annotations[SLICE_NAME] == old["metadata"]["name"]
        assert new["spec"]["podSets"][0]["count"] == 4
        assignment = new["status"]["admission"]["podSetAssignments"][0]
        assert (assignment["count"], assignment["flavors"]["cpu"], assignment["resourceUsage"]["cpu"]) == (
            4,
            "cpu",
            "4",
        )
        finished = next(c for c in old["status"]["conditions"] if c["type"] == "Finished")
        assert finished["reason"] == "WorkloadSliceReplaced"
        assert finished["message"] == (
            f"Replaced to accommodate a workload (UID: {new['metadata']['uid']}, "
            f"JobUID: {created['metadata']['uid']}) due to workload slice aggregation"
        )

        pods = await eventually(lambda: _running(env, "big", 4), what="big's 4 pods ungated and scheduled")
        assert all(p["spec"]["nodeSelector"]["kadmit.dev/pool"] == "cpu" for p in pods), (
            "the flavor's node labels"
        )
    names = {p["metadata"]["name"] for p in pods}
    assert {p["metadata"]["name"] for p in before} < names, "the first 2 pods ran on, 2 were added"

    # the queue is charged the 4 cpu once (not 2 + 4): 1 cpu is left, and a 2-cpu job waits
    async def charged_four() -> bool:
        return await _reserved_cpu(env, "elastic") == "4"

    await eventually(charged_four, what="the ClusterQueue charged 4 cpu")
    await env.kube.create(JOBS, job("next", cpu="1", parallelism=2, runtime="60s", queue="elastic"))

    async def next_waits() -> bool:
        slices = await _slices(env, "next")
        return len(slices) == 1 and condition(slices[0], "QuotaReserved") == "False"

    await eventually(next_waits, what="next waits: 1 cpu left")
    assert await _reserved_cpu(env, "elastic") == "4"

    async def counted() -> bool:
        return await _replaced_total(env, "elastic") == 1.0

    await eventually(counted, what="kueue_replaced_workload_slices_total{cluster_queue=elastic} 1")


async def test_a_scale_up_that_does_not_fit_waits_while_the_job_runs_at_its_old_size(
    kadmit: WebhookEnv,
) -> None:
    env = kadmit
    await Applier(env.kube).apply_all([_flavor(), _cq("elastic", 4), _lq("elastic", "elastic")])
    await env.kube.create(JOBS, job("other", cpu="1", parallelism=1, runtime="120s", queue="elastic"))
    await eventually(lambda: _job_running(env, "other"), what="other admitted: 1 cpu")
    await env.kube.create(JOBS, _elastic("big", 2, 8))
    before = await eventually(lambda: _running(env, "big", 2), what="big admitted and running: 2 cpu, 1 left")

    async with _NeverSuspended(env, "big"):
        await env.kube.patch(JOBS, "default", "big", {"spec": {"parallelism": 4}})  # 2 more needed, 1 free

        async def new_slice_pending() -> list[Obj] | None:
            slices = await _slices(env, "big")
            if len(slices) == 2 and condition(slices[1], "QuotaReserved") == "False":
                return slices
            return None

        old, new = await eventually(new_slice_pending, what="the new slice waits for quota")
        reserved = next(c for c in new["status"]["conditions"] if c["type"] == "QuotaReserved")
        assert reserved["reason"] == "WaitingForQuota"
        assert "insufficient unused quota for cpu in flavor cpu, 1 more needed" in reserved["message"]
        assert condition(old, "Admitted") == "True" and condition(old, "Finished") is None

        async def two_of_four_gated() -> bool:
            pods = await _pods(env, "big")
            running = [p for p in pods if not _gated(p) and p["spec"].get("nodeName")]
            return len(pods) == 4 and len(running) == 2 and sum(map(_gated, pods)) == 2

        await eventually(two_of_four_gated, what="2 pods run, the 2 new ones wait at their gate")
        await asyncio.sleep(1)  # and keep waiting
        assert await two_of_four_gated()
        assert await _reserved_cpu(env, "elastic") == "3"

        await env.kube.delete(JOBS, "default", "other", propagation_policy="Background")
        after = await eventually(
            lambda: _running(env, "big", 4), what="other gone: the new slice admitted, 4 pods run"
        )
        assert {p["metadata"]["name"] for p in before} < {p["metadata"]["name"] for p in after}
        slices = await _slices(env, "big")
        assert condition(slices[0], "Finished") == "True" and condition(slices[1], "Admitted") == "True"


async def test_a_scaled_up_elastic_job_is_preempted_and_restarted_on_its_new_slice(
    kadmit: WebhookEnv,
) -> None:
    env = kadmit
    preemption = {"withinClusterQueue": "LowerPriority"}
    await Applier(env.kube).apply_all(
        [
            _flavor(),
            _cq("elastic", 4, preemption=preemption),
            _lq("elastic", "elastic"),
            _priority("low", 10),
            _priority("high", 1000),
        ]
    )
    big = _elastic("big", 2, 8)
    big["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "low"
    await env.kube.create(JOBS, big)
    await eventually(lambda: _running(env, "big", 2), what="big running its 2 pods")
    await env.kube.patch(JOBS, "default", "big", {"spec": {"parallelism": 3}})
    await eventually(lambda: _running(env, "big", 3), what="big scaled up to 3 running pods")
    old, new = await _slices(env, "big")
    assert condition(old, "Finished") == "True" and condition(new, "Admitted") == "True"

    high = job("high", cpu="3", parallelism=1, runtime="2s", queue="elastic", priority_class="high")
    await env.kube.create(JOBS, high)

    async def preempted() -> bool:
        current = (await _slices(env, "big"))[1]
        return condition(current, "Preempted") == "True" and is_stopped(
            await env.kube.get(JOBS, "default", "big")
        )

    await eventually(preempted, what="big's new slice preempted by high and big suspended")

    async def high_complete() -> bool:
        return condition(await env.kube.get(JOBS, "default", "high"), "Complete") == "True"

    await eventually(high_complete, what="high runs and completes")
    # re-admitted on its (new) slice and started again by kadmit, past the webhook's start guard
    await eventually(lambda: _running(env, "big", 3), what="big re-admitted and running its 3 pods")
    slices = await _slices(env, "big")
    assert len(slices) == 2 and condition(slices[1], "Admitted") == "True"
    assert condition(slices[0], "Finished") == "True"


async def _elastic_slices(kube: Any) -> list[Obj]:
    items = (await kube.list(WORKLOADS, "default"))["items"]
    return [w for w in items if w["metadata"]["name"].startswith("raycluster-elastic-")]


async def test_an_elastic_raycluster_starts_its_pods_as_its_slices_grant(kadmit: WebhookEnv) -> None:
    """Kueue's RayCluster webhook gates an elastic cluster's head and worker pods with the
    ``kueue.x-k8s.io/elastic-job`` scheduling gate; the gate is lifted for as many pods as the
    admitted Workload slice grants, and a scale-up is admitted as a new slice for the delta."""
    kube = kadmit.kube
    await apply_small_setup(kube)
    cluster = raycluster("elastic", workers=1, cpu="1")  # 2 of the queue's 4 cpu
    cluster["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    created = await kube.create(RAY_CLUSTERS, cluster)
    assert created["spec"]["suspend"] is True
    for tmpl in templates_of_cluster(created).values():
        assert tmpl["spec"]["schedulingGates"] == [{"name": GATE}]  # by the mutating webhook

    async def ready(workers: int) -> Obj | None:
        current = await kube.get(RAY_CLUSTERS, "default", "elastic")
        status = current.get("status") or {}
        serving = status.get("state") == "ready" and status.get("readyWorkerReplicas") == workers
        return current if serving else None

    await eventually(lambda: ready(1), within=30, what="the elastic RayCluster ready, its pods ungated")
    pods = (await kube.list(PODS, "default", label_selector="ray.io/cluster=elastic"))["items"]
    assert len(pods) == 2 and not any(p["spec"].get("schedulingGates") for p in pods)
    assert all(p["spec"]["nodeSelector"] == POOL for p in pods)
    [first] = await _elastic_slices(kube)

    workers = (await kube.get(RAY_CLUSTERS, "default", "elastic"))["spec"]["workerGroupSpecs"]
    workers[0]["replicas"] = 2
    await kube.patch(RAY_CLUSTERS, "default", "elastic", {"spec": {"workerGroupSpecs": workers}})
    await eventually(lambda: ready(2), within=30, what="the scaled-up RayCluster ready with 2 workers")
    slices = await _elastic_slices(kube)
    new = next(w for w in slices if w["metadata"]["uid"] != first["metadata"]["uid"])
    old = next(w for w in slices if w["metadata"]["uid"] == first["metadata"]["uid"])
    assert new["metadata"]["annotations"]["kueue.x-k8s.io/workload-slice-replacement-for"] == (
        f"default/{first['metadata']['name']}"
    )
    assert true(new, "Admitted")
    assert condition_of(old, "Finished")["reason"] == "WorkloadSliceReplaced"  # type: ignore[index]
    assert (await kube.get(RAY_CLUSTERS, "default", "elastic"))["spec"]["suspend"] is False
