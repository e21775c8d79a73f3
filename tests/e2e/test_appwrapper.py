"""An AppWrapper goes the way a Job does: suspended by kadmit's webhook, one Workload for all it
wraps (a pod set per pod template of its components), admitted with the flavor written into
``spec.components[].podSetInfos``, run by the local cluster's simulated AppWrapper controller,
preempted by a higher-priority Job (its components deleted, the infos cleared exactly) and
admitted again. Its sample runs with kubectl on ``kadmit local`` in tests/e2e/test_ray.py."""

from __future__ import annotations

import copy
from typing import Any

from kadmit.kube.resources import APPWRAPPERS, JOBS, PODS, WORKLOADS
from tests.e2e.conftest import WebhookEnv, eventually
from tests.e2e.helpers import apply_small_setup, condition_of, job

Obj = dict[str, Any]
POOL = {"kadmit.dev/pool": "cpu"}


def appwrapper(
    name: str, *, pods: int = 2, cpu: str = "500m", runtime: str = "300ms", queue: str = "small"
) -> Obj:
    wrapped = job(f"{name}-job", cpu=cpu, parallelism=pods, runtime=runtime, queue=queue)
    del wrapped["metadata"]["namespace"], wrapped["metadata"]["labels"], wrapped["spec"]["suspend"]
    return {
        "apiVersion": "workload.codeflare.dev/v1beta2",
        "kind": "AppWrapper",
        "metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"components": [{"template": wrapped}]},
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


async def phase(kube: Any, name: str, wanted: str) -> Obj | None:
    current = await kube.get(APPWRAPPERS, "default", name)
    return current if (current.get("status") or {}).get("phase") == wanted else None  # type: ignore[no-any-return]


async def test_appwrapper_is_admitted_as_one_workload_and_succeeds(kadmit: WebhookEnv) -> None:
    kube = kadmit.kube
    await apply_small_setup(kube)
    created = await kube.create(APPWRAPPERS, appwrapper("wrapped"))
    assert created["spec"]["suspend"] is True  # by the mutating webhook mappwrapper.kb.io

    wl = await eventually(
        lambda: workload_named(kube, "appwrapper-wrapped-"), what="the AppWrapper's Workload"
    )
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("wrapped-0", 2)]

    done = await eventually(
        lambda: phase(kube, "wrapped", "Succeeded"), within=30, what="the AppWrapper Succeeded"
    )
    (info,) = done["spec"]["components"][0]["podSetInfos"]
    assert info["nodeSelector"] == POOL and info["labels"]["kueue.x-k8s.io/podset"] == "wrapped-0"
    component = await kube.get(JOBS, "default", "wrapped-job")  # created by the AppWrapper controller
    assert component["metadata"]["ownerReferences"][0]["kind"] == "AppWrapper"
    assert component["spec"]["template"]["spec"]["nodeSelector"] == POOL
    pods = (await kube.list(PODS, "default", label_selector="workload.codeflare.dev/appwrapper=wrapped"))[
        "items"
    ]
    assert len(pods) == 2 and all(p["spec"]["nodeName"].startswith("cpu-") for p in pods)

    async def finished() -> Obj | None:
        current = await workload_named(kube, "appwrapper-wrapped-")
        return current if current is not None and true(current, "Finished") else None

    wl = await eventually(finished, what="the Workload Finished with the AppWrapper")
    assert condition_of(wl, "Finished")["message"] == "AppWrapper finished successfully"  # type: ignore[index]
    assert len((await kube.list(WORKLOADS, "default"))["items"]) == 1  # the wrapped Job has none of its own


async def test_a_preempted_appwrapper_is_suspended_restored_and_readmitted(kadmit: WebhookEnv) -> None:
    kube = kadmit.kube
    await apply_small_setup(kube)
    # 3 of the queue's 4 cpu, for long enough to be preempted on a loaded machine
    low = appwrapper("low", pods=3, cpu="1", runtime="5s")
    low["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "low"
    created = await kube.create(APPWRAPPERS, low)
    original = copy.deepcopy(created["spec"]["components"])
    await eventually(lambda: phase(kube, "low", "Running"), within=30, what="the low AppWrapper Running")

    await kube.create(
        JOBS, job("high", cpu="1", parallelism=2, runtime="1500ms", queue="small", priority_class="high")
    )

    async def stopped() -> Obj | None:
        current = await phase(kube, "low", "Suspended")
        annotations = (current or {}).get("metadata", {}).get("annotations") or {}
        if current is None or not current["spec"].get("suspend") or "kueue.x-k8s.io/stopping" in annotations:
            return None
        return current

    suspended = await eventually(stopped, within=20, what="the AppWrapper suspended, its components gone")
    assert suspended["spec"]["components"] == original  # the podSetInfos cleared
    victim = await workload_named(kube, "appwrapper-low-")
    assert victim is not None and condition_of(victim, "Preempted")["reason"] == "InClusterQueue"  # type: ignore[index]

    done = await eventually(lambda: phase(kube, "low", "Succeeded"), within=40, what="the AppWrapper re-run")
    assert done["spec"]["components"][0]["podSetInfos"][0]["nodeSelector"] == POOL
