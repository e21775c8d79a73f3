"""LeaderWorkerSets through kadmit local (Kueue's ``leaderworkerset`` integration): each group of
a leader and its workers is one Workload (pod sets ``leader`` and ``worker``), admitted as a gang
only once all its Pods exist, run by the local cluster's simulated LeaderWorkerSet controller
(the CRD served with its upstream schema), preempted whole and admitted again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from kadmit.controller.jobs.leaderworkerset import lws_workload_name
from kadmit.kube.resources import JOBS, LEADER_WORKER_SETS, PODS, WORKLOADS
from tests.e2e.conftest import WebhookEnv, eventually, fast_config, webhook_env
from tests.e2e.helpers import apply_small_setup, condition_of, job

Obj = dict[str, Any]
FRAMEWORKS = ("batch/job", "leaderworkerset.x-k8s.io/leaderworkerset")
GATE = "kueue.x-k8s.io/admission"


@pytest.fixture
async def kadmit_lws() -> AsyncIterator[WebhookEnv]:
    async for env in webhook_env(config=fast_config(frameworks=FRAMEWORKS)):
        yield env


def template(cpu: str) -> Obj:
    return {
        "spec": {
            "containers": [
                {"name": "main", "image": "vllm", "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}
            ]
        }
    }


def lws(name: str, replicas: int, size: int, *, priority_class: str | None = None) -> Obj:
    labels = {"kueue.x-k8s.io/queue-name": "small"}
    if priority_class:
        labels["kueue.x-k8s.io/priority-class"] = priority_class
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {
                "size": size,
                "leaderTemplate": template("500m"),
                "workerTemplate": template("500m"),
            },
        },
    }


def true(obj: Obj, kind: str) -> bool:
    found = condition_of(obj, kind)
    return found is not None and found["status"] == "True"


async def test_each_group_is_one_workload_admitted_as_a_gang(kadmit_lws: WebhookEnv) -> None:
    kube = kadmit_lws.kube
    await apply_small_setup(kube)
    created = await kube.create(LEADER_WORKER_SETS, lws("infer", 2, 3))
    worker = created["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]
    assert worker["annotations"]["kueue.x-k8s.io/pod-suspending-parent"] == "leaderworkerset"
    assert worker["annotations"]["kueue.x-k8s.io/pod-group-serving"] == "true"
    names = [lws_workload_name(created, str(i)) for i in range(2)]
    assert names[0].startswith("leaderworkerset-infer-0-")

    def owned_by_the_set(wl: Obj) -> bool:
        return any(r["kind"] == "LeaderWorkerSet" for r in wl["metadata"].get("ownerReferences") or [])

    async def both() -> list[Obj] | None:
        # The group's Pods make its Workload; the LeaderWorkerSet is added as an owner by the
        # parent's reconciler when it sees the Workload, which admission may come before.
        found = [await kube.get_or_none(WORKLOADS, "default", n) for n in names]
        done = all(w is not None and true(w, "Admitted") and owned_by_the_set(w) for w in found)
        return found if done else None  # type: ignore[return-value]

    for wl in await eventually(both, within=30, what="a Workload per group, admitted and owned by the set"):
        assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("leader", 1), ("worker", 2)]

    async def running() -> list[Obj] | None:
        pods = (await kube.list(PODS, "default", label_selector="leaderworkerset.sigs.k8s.io/name=infer"))[
            "items"
        ]
        ok = len(pods) == 6 and all(p["status"].get("phase") == "Running" for p in pods)
        return pods if ok else None

    for pod in await eventually(running, within=30, what="six Pods running"):
        assert pod["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"}
        assert GATE not in [g["name"] for g in pod["spec"].get("schedulingGates") or []]


async def test_a_preempted_group_comes_back_whole_and_is_readmitted(kadmit_lws: WebhookEnv) -> None:
    kube = kadmit_lws.kube
    await apply_small_setup(kube)
    bigger = lws("low", 1, 3, priority_class="low")  # 3 of the queue's 4 cpu
    for key in ("leaderTemplate", "workerTemplate"):
        bigger["spec"]["leaderWorkerTemplate"][key] = template("1")
    created = await kube.create(LEADER_WORKER_SETS, bigger)
    name = lws_workload_name(created, "0")
    selector = "leaderworkerset.sigs.k8s.io/name=low"

    async def running() -> list[Obj] | None:
        pods = [
            p
            for p in (await kube.list(PODS, "default", label_selector=selector))["items"]
            if not p["metadata"].get("deletionTimestamp")
        ]
        ok = len(pods) == 3 and all(p["status"].get("phase") == "Running" for p in pods)
        return pods if ok else None

    first = {p["metadata"]["uid"] for p in await eventually(running, within=30, what="the group running")}
    await kube.create(
        JOBS, job("high", cpu="1", parallelism=2, runtime="1500ms", queue="small", priority_class="high")
    )

    async def preempted() -> Obj | None:
        wl = await kube.get_or_none(WORKLOADS, "default", name)
        return wl if wl is not None and true(wl, "Preempted") else None

    await eventually(preempted, what="the group's Workload preempted")

    async def high_done() -> bool:
        return true(await kube.get(JOBS, "default", "high"), "Complete")

    await eventually(high_done, what="the high-priority Job complete")
    pods = await eventually(running, within=40, what="the group recreated whole, re-admitted, running")
    assert not first & {p["metadata"]["uid"] for p in pods}
    assert all(p["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"} for p in pods)
    current = await kube.get(LEADER_WORKER_SETS, "default", "low")
    assert current["spec"]["leaderWorkerTemplate"] == created["spec"]["leaderWorkerTemplate"]  # as written
    wl = await kube.get(WORKLOADS, "default", name)
    assert true(wl, "Admitted") and [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [
        ("leader", 1),
        ("worker", 2),
    ]
