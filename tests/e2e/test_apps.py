"""Deployments and StatefulSets through kadmit local (Kueue's ``deployment`` and ``statefulset``
integrations, riding on the pod integration), run by the local cluster's simulated controllers.

A managed Deployment's Pods are gated and admitted one by one, each its own Workload; a managed
StatefulSet's Pods are one pod group (fast admission: admitted with its first Pod), named as
Kueue names it. Both are serving: their Workloads do not finish while the Pods run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from kadmit.controller.jobs.statefulset import statefulset_workload_name
from kadmit.kube import ApiError
from kadmit.kube.resources import CLUSTER_QUEUES, DEPLOYMENTS, JOBS, PODS, STATEFUL_SETS, WORKLOADS
from tests.e2e.conftest import WebhookEnv, eventually, fast_config, webhook_env
from tests.e2e.helpers import apply_small_setup, condition_of, job

Obj = dict[str, Any]
FRAMEWORKS = ("batch/job", "deployment", "statefulset")  # pod enabled implicitly, for their Pods only
GATE = "kueue.x-k8s.io/admission"


@pytest.fixture
async def kadmit_apps() -> AsyncIterator[WebhookEnv]:
    async for env in webhook_env(config=fast_config(frameworks=FRAMEWORKS)):
        yield env


def app(kind: str, name: str, replicas: int, *, cpu: str = "500m", priority_class: str | None = None) -> Obj:
    labels = {"kueue.x-k8s.io/queue-name": "small"}
    if priority_class:
        labels["kueue.x-k8s.io/priority-class"] = priority_class
    spec: Obj = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "nginx",
                        "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}},
                    }
                ]
            },
        },
    }
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": spec,
    }


def true(obj: Obj, kind: str) -> bool:
    found = condition_of(obj, kind)
    return found is not None and found["status"] == "True"


async def pods_of(env: WebhookEnv, app_name: str) -> list[Obj]:
    return list((await env.kube.list(PODS, "default", label_selector=f"app={app_name}"))["items"])


async def test_a_deployment_is_admitted_pod_by_pod_with_its_flavor(kadmit_apps: WebhookEnv) -> None:
    kube = kadmit_apps.kube
    await apply_small_setup(kube)
    created = await kube.create(DEPLOYMENTS, app("Deployment", "web", 3))
    template = created["spec"]["template"]["metadata"]
    assert template["annotations"]["kueue.x-k8s.io/pod-suspending-parent"] == "deployment"
    assert template["labels"]["kueue.x-k8s.io/managed"] == "true"
    assert template["labels"]["kueue.x-k8s.io/queue-name"] == "small"

    async def running() -> list[Obj] | None:
        found = await pods_of(kadmit_apps, "web")
        ok = len(found) == 3 and all(p["status"].get("phase") == "Running" for p in found)
        return found if ok else None

    for pod in await eventually(running, what="the Deployment's three Pods admitted and running"):
        assert pod["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"}
        assert GATE not in [g["name"] for g in pod["spec"].get("schedulingGates") or []]
        assert not pod["metadata"].get("finalizers")  # a parent's Pod: no Pod finalizer
    workloads = (await kube.list(WORKLOADS, "default"))["items"]
    assert sorted(w["spec"]["podSets"][0]["count"] for w in workloads) == [1, 1, 1]
    assert all(true(w, "Admitted") and not true(w, "Finished") for w in workloads)

    async def available() -> bool:
        deployment = await kube.get(DEPLOYMENTS, "default", "web")
        return (deployment.get("status") or {}).get("readyReplicas") == 3

    await eventually(available, what="the Deployment available")


async def test_a_stateful_set_is_one_gang_and_is_scaled_only_as_kueue_allows(kadmit_apps: WebhookEnv) -> None:
    kube = kadmit_apps.kube
    await apply_small_setup(kube)
    created = await kube.create(STATEFUL_SETS, app("StatefulSet", "db", 3))
    assert (
        created["spec"]["template"]["metadata"]["annotations"]["kueue.x-k8s.io/pod-suspending-parent"]
        == "statefulset"
    )
    name = statefulset_workload_name(created)
    assert name.startswith("statefulset-db-")

    wl = await eventually(
        lambda: kube.get_or_none(WORKLOADS, "default", name), what="the StatefulSet's Workload"
    )
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("main", 3)]

    async def ready() -> list[Obj] | None:
        found = await pods_of(kadmit_apps, "db")
        ok = len(found) == 3 and all(p["status"].get("phase") == "Running" for p in found)
        return found if ok else None

    pods = await eventually(ready, within=30, what="db-0, db-1, db-2 admitted as one gang, then run in order")
    assert sorted(p["metadata"]["name"] for p in pods) == ["db-0", "db-1", "db-2"]
    for pod in pods:
        assert pod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] == name
        assert pod["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] == "3"
        assert pod["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"}
    assert true(await kube.get(WORKLOADS, "default", name), "Admitted")

    # Kueue admits a StatefulSet as one group of its replicas: 3 -> 5 is refused as Kueue refuses it
    with pytest.raises(ApiError) as refused:
        await kube.patch(STATEFUL_SETS, "default", "db", {"spec": {"replicas": 5}})
    assert "spec.replicas: Invalid value: 5: field is immutable" in refused.value.message
    assert (await kube.get(STATEFUL_SETS, "default", "db"))["spec"]["replicas"] == 3


async def test_a_preempted_stateful_set_comes_back_as_it_was_and_is_readmitted(
    kadmit_apps: WebhookEnv,
) -> None:
    kube = kadmit_apps.kube
    await apply_small_setup(kube)
    created = await kube.create(STATEFUL_SETS, app("StatefulSet", "low", 3, cpu="1", priority_class="low"))
    name = statefulset_workload_name(created)

    async def running() -> list[Obj] | None:
        found = await pods_of(kadmit_apps, "low")
        ok = len(found) == 3 and all(p["status"].get("phase") == "Running" for p in found)
        return found if ok else None

    first = {
        p["metadata"]["uid"] for p in await eventually(running, within=30, what="the StatefulSet running")
    }
    await kube.create(
        JOBS, job("high", cpu="1", parallelism=2, runtime="1500ms", queue="small", priority_class="high")
    )

    async def preempted() -> Obj | None:
        wl = await kube.get_or_none(WORKLOADS, "default", name)
        return wl if wl is not None and true(wl, "Preempted") else None

    victim = await eventually(preempted, what="the StatefulSet's Workload preempted")
    assert condition_of(victim, "Evicted")["reason"] == "Preempted"  # type: ignore[index]

    async def high_done() -> bool:
        return true(await kube.get(JOBS, "default", "high"), "Complete")

    await eventually(high_done, what="the high-priority Job complete")
    pods = await eventually(running, within=40, what="the StatefulSet's Pods recreated, re-admitted, running")
    assert not first & {p["metadata"]["uid"] for p in pods}  # new Pods, from the same template
    for pod in pods:
        assert pod["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"}
    sts = await kube.get(STATEFUL_SETS, "default", "low")
    assert sts["spec"]["template"] == created["spec"]["template"]  # the StatefulSet as the user wrote it
    assert sts["spec"]["replicas"] == 3
    wl = await kube.get(WORKLOADS, "default", name)
    assert true(wl, "Admitted") and [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("main", 3)]


async def test_a_preempted_deployment_pod_is_deleted_recreated_and_readmitted(
    kadmit_apps: WebhookEnv,
) -> None:
    """Kueue stops a Deployment's Pod by deleting it; its ReplicaSet makes a new one, gated again,
    which a new Workload admits once the quota is free."""
    kube = kadmit_apps.kube
    await apply_small_setup(kube)
    created = await kube.create(DEPLOYMENTS, app("Deployment", "api", 3, cpu="1", priority_class="low"))

    async def running() -> list[Obj] | None:
        found = [p for p in await pods_of(kadmit_apps, "api") if not p["metadata"].get("deletionTimestamp")]
        ok = len(found) == 3 and all(p["status"].get("phase") == "Running" for p in found)
        return found if ok else None

    first = {p["metadata"]["name"] for p in await eventually(running, what="the Deployment running")}
    await kube.create(
        JOBS, job("high", cpu="1", parallelism=2, runtime="1500ms", queue="small", priority_class="high")
    )

    async def replaced() -> list[Obj] | None:
        found = await pods_of(kadmit_apps, "api")
        fresh = [p for p in found if p["metadata"]["name"] not in first]
        gated = [p for p in fresh if GATE in [g["name"] for g in p["spec"].get("schedulingGates") or []]]
        return gated if gated else None

    waiting = await eventually(replaced, what="a preempted Pod replaced by a gated one")
    assert all(p["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet" for p in waiting)

    async def high_done() -> bool:
        return true(await kube.get(JOBS, "default", "high"), "Complete")

    await eventually(high_done, what="the high-priority Job complete")
    pods = await eventually(running, within=30, what="the Deployment back to three running Pods")
    assert first - {p["metadata"]["name"] for p in pods}  # some were preempted and replaced
    for pod in pods:
        assert pod["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"}
    deployment = await kube.get(DEPLOYMENTS, "default", "api")
    assert (
        deployment["spec"]["template"] == created["spec"]["template"]
    )  # as the user wrote it (plus Kueue's marks)


async def test_a_stateful_set_scaled_to_zero_is_on_hold_and_readmitted_when_scaled_back(
    kadmit_apps: WebhookEnv,
) -> None:
    """Kueue's statefulset reconciler: at 0 replicas the Workload stays, its quota released and
    on hold (``QuotaReserved: False, OnHold``, never requeued); scaled up again it is requeued
    and admitted, and the new Pods run."""
    kube = kadmit_apps.kube
    await apply_small_setup(kube)
    created = await kube.create(STATEFUL_SETS, app("StatefulSet", "cache", 2, cpu="1"))
    name = statefulset_workload_name(created)

    async def running() -> list[Obj] | None:
        found = await pods_of(kadmit_apps, "cache")
        ok = len(found) == 2 and all(p["status"].get("phase") == "Running" for p in found)
        return found if ok else None

    await eventually(running, within=30, what="the StatefulSet running")
    await kube.patch(STATEFUL_SETS, "default", "cache", {"spec": {"replicas": 0}})

    async def on_hold() -> Obj | None:
        wl = await kube.get_or_none(WORKLOADS, "default", name)
        found = condition_of(wl, "QuotaReserved") if wl is not None else None
        return wl if found is not None and found["reason"] == "OnHold" else None

    held = await eventually(on_hold, within=20, what="the Workload on hold")
    reserved = condition_of(held, "QuotaReserved")
    assert reserved is not None
    assert reserved["status"] == "False"
    assert reserved["message"] == "StatefulSet scaled to zero; workload on hold"
    assert not true(held, "Admitted") and not true(held, "Finished")
    assert "admission" not in held.get("status", {})
    assert any(r["uid"] == created["metadata"]["uid"] for r in held["metadata"]["ownerReferences"])

    async def released() -> bool:
        cq = await kube.get(CLUSTER_QUEUES, "", "small")
        usage = (cq.get("status") or {}).get("flavorsUsage") or []
        return all(r["total"] in ("0", 0) for f in usage for r in f["resources"])

    await eventually(released, what="the ClusterQueue's quota released")

    async def no_pods() -> bool:
        return not await pods_of(kadmit_apps, "cache")

    await eventually(no_pods, what="the Pods gone")
    still = await kube.get(WORKLOADS, "default", name)
    assert condition_of(still, "QuotaReserved")["reason"] == "OnHold"  # type: ignore[index]  # not requeued

    async def scaled_up() -> bool:
        try:
            await kube.patch(STATEFUL_SETS, "default", "cache", {"spec": {"replicas": 2}})
        except ApiError as exc:  # Kueue refuses while the scale-down is in progress
            assert "scaling down is still in progress" in exc.message, exc.message
            return False
        return True

    await eventually(scaled_up, what="the StatefulSet scaled back to 2")
    pods = await eventually(running, within=30, what="the StatefulSet's Pods re-admitted and running")
    assert all(p["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"} for p in pods)
    wl = await kube.get(WORKLOADS, "default", name)
    assert true(wl, "Admitted") and [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("main", 2)]
