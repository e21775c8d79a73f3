"""The Configuration's ``resources.transformations`` through the API on a local cluster: Kueue's
shared-quota setup, where every cpu a job asks for is also charged to a ``credits`` flavor."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from kadmit.engine.transformations import ResourceTransformation, ResourceTransformations
from kadmit.kube.resources import JOBS, WORKLOADS
from tests.e2e.conftest import Env, eventually, fast_config
from tests.e2e.helpers import condition, condition_of, job, wait_workload

API = "kueue.x-k8s.io/v1beta2"
Obj = dict[str, Any]


def _flavor(name: str) -> Obj:
    return {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": name}}


# Kueue's admin/shared-quota-setup.yaml: cpu from on-demand or spot, and cpu_credits from credits.
SETUP: list[Obj] = [
    _flavor("on-demand"),
    _flavor("spot"),
    _flavor("credits"),
    {
        "apiVersion": API,
        "kind": "ClusterQueue",
        "metadata": {"name": "cluster-queue"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "on-demand", "resources": [{"name": "cpu", "nominalQuota": 9}]},
                        {"name": "spot", "resources": [{"name": "cpu", "nominalQuota": 9}]},
                    ],
                },
                {
                    "coveredResources": ["cpu_credits"],
                    "flavors": [
                        {"name": "credits", "resources": [{"name": "cpu_credits", "nominalQuota": 14}]}
                    ],
                },
            ],
        },
    },
    {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": {"name": "user-queue", "namespace": "default"},
        "spec": {"clusterQueue": "cluster-queue"},
    },
]


def _cpu_job(name: str) -> Obj:
    obj = job(name, parallelism=3, runtime="60s", queue="user-queue")
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    return obj


async def test_cpu_is_charged_to_credits_too(env: Env) -> None:
    credits = ResourceTransformation("cpu", {"cpu_credits": Fraction(1)})
    await env.start_manager(
        fast_config(resource_transformations=ResourceTransformations(transformations=[credits]))
    )
    await env.applier.apply_all(SETUP)
    for i in range(5):
        await env.kube.create(JOBS, _cpu_job(f"job-{i}"))

    async def admitted() -> list[Obj] | None:
        items = (await env.kube.list(WORKLOADS, "default"))["items"]
        done = [w for w in items if condition(w, "Admitted") == "True"]
        return done if len(done) == 4 else None

    running = await eventually(admitted, what="four jobs admitted: 12 of the 14 credits")
    for wl in running:
        [assignment] = wl["status"]["admission"]["podSetAssignments"]
        assert assignment["resourceUsage"] == {"cpu": "3", "cpu_credits": "3"}, assignment
        assert assignment["flavors"]["cpu_credits"] == "credits"
    assert sorted(w["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"] for w in running) == [
        "on-demand",
        "on-demand",
        "on-demand",
        "spot",
    ]
    # spot has 6 cpu left, but the credits are spent: the fifth job waits for them.
    [waiting] = [
        w for w in (await env.kube.list(WORKLOADS, "default"))["items"] if condition(w, "Admitted") != "True"
    ]
    name = next(ref["name"] for ref in waiting["metadata"]["ownerReferences"])
    waiting = await wait_workload(
        env,
        name,
        lambda w: "cpu_credits" in ((condition_of(w, "QuotaReserved") or {}).get("message") or ""),
        "told",
    )
    assert (
        "insufficient unused quota for cpu_credits in flavor credits, 1 more needed"
        in condition_of(waiting, "QuotaReserved")["message"]  # type: ignore[index]
    )
