"""A namespace's LimitRange through the API on a local cluster (issue 14): its defaults count in
the quota a Job's Workload reserves, a Job breaking it waits Misconfigured with Kueue's message,
and a changed LimitRange is applied to the Workloads still waiting."""

from __future__ import annotations

from typing import Any

from kadmit.kube.resources import JOBS, LIMIT_RANGES
from tests.e2e.conftest import Env
from tests.e2e.helpers import condition, condition_of, is_complete, job, wait_job, wait_workload

API = "kueue.x-k8s.io/v1beta2"
Obj = dict[str, Any]


def _limit_range(max_cpu: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "team-limits", "namespace": "default"},
        "spec": {
            "limits": [
                {
                    "type": "Container",
                    "max": {"cpu": max_cpu},
                    "default": {"cpu": "500m", "memory": "200Mi"},
                    "defaultRequest": {"cpu": "250m", "memory": "100Mi"},
                }
            ]
        },
    }


def _job_with(name: str, resources: Obj) -> Obj:
    obj = job(name, parallelism=2, runtime="300ms")
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] = resources
    return obj


SETUP = [
    {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}},
    {
        "apiVersion": API,
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": "default-flavor",
                            "resources": [
                                {"name": "cpu", "nominalQuota": 4},
                                {"name": "memory", "nominalQuota": "8Gi"},
                            ],
                        }
                    ],
                }
            ],
        },
    },
    {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": {"name": "default", "namespace": "default"},
        "spec": {"clusterQueue": "cq"},
    },
]


async def test_limit_range_defaults_bound_and_follow_changes(env: Env) -> None:
    await env.start_manager()
    await env.applier.apply_all(SETUP)
    await env.kube.create(LIMIT_RANGES, _limit_range("500m"))

    # Declares nothing: reserves the LimitRange's defaultRequest for each of its 2 pods.
    await env.kube.create(JOBS, _job_with("bare", {}))
    admitted = await wait_workload(env, "bare", lambda w: condition(w, "Admitted") == "True", "admitted")
    [assignment] = admitted["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"] == {"cpu": "500m", "memory": "200Mi"}, assignment
    await wait_job(env, "bare", is_complete, "complete")

    # 1 cpu a container, above the LimitRange's max: Kueue's ValidateLimitRange message.
    await env.kube.create(JOBS, _job_with("wide", {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}))
    pending = await wait_workload(
        env,
        "wide",
        lambda w: (condition_of(w, "QuotaReserved") or {}).get("reason") == "Misconfigured",
        "pending, Misconfigured",
    )
    assert condition_of(pending, "QuotaReserved")["message"] == (  # type: ignore[index]
        "resources didn't satisfy LimitRange constraints: spec.podSets[0].template.spec.containers[0]: "
        'Invalid value: ["cpu"]: requests must not be above the limitRange max'
    )
    # What the scheduler counts for it, as Kueue writes it: the memory request is the default.
    pending = await wait_workload(env, "wide", lambda w: "resourceRequests" in w["status"], "told")
    counted = {"cpu": "2", "memory": "200Mi"}
    assert pending["status"]["resourceRequests"] == [{"name": "main", "resources": counted}]

    # The LimitRange raised: the waiting Workload is read again and admitted.
    current = await env.kube.get(LIMIT_RANGES, "default", "team-limits")
    current["spec"]["limits"][0]["max"]["cpu"] = "2"
    await env.kube.replace(LIMIT_RANGES, current)
    await wait_job(env, "wide", is_complete, "admitted and complete once the LimitRange allows it")
    admitted = await wait_workload(env, "wide", lambda w: condition(w, "Admitted") == "True", "admitted")
    assert "resourceRequests" not in admitted["status"]  # cleared once admitted, as Kueue does
