"""A RuntimeClass's pod overhead through the API on a local cluster: a Job whose pods name it
reserves the overhead too, as Kueue counts it, and a changed overhead is read by the Workloads
still waiting."""

from __future__ import annotations

from typing import Any

from kadmit.kube.resources import JOBS, RUNTIME_CLASSES
from tests.e2e.conftest import Env
from tests.e2e.helpers import condition, condition_of, is_complete, job, wait_job, wait_workload
from tests.e2e.test_limit_ranges import SETUP

Obj = dict[str, Any]


def _runtime_class(cpu: str) -> Obj:
    return {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": "kata"},
        "handler": "kata",
        "overhead": {"podFixed": {"cpu": cpu, "memory": "120Mi"}},
    }


def _sandboxed(name: str, pods: int) -> Obj:
    obj = job(name, parallelism=pods, runtime="300ms")
    obj["spec"]["template"]["spec"]["runtimeClassName"] = "kata"
    return obj


async def test_runtime_class_overhead_is_reserved_and_followed(env: Env) -> None:
    await env.start_manager()
    await env.applier.apply_all(SETUP)  # 4 cpu, 8Gi
    await env.kube.create(RUNTIME_CLASSES, _runtime_class("500m"))

    await env.kube.create(JOBS, _sandboxed("small", 2))
    admitted = await wait_workload(env, "small", lambda w: condition(w, "Admitted") == "True", "admitted")
    [assignment] = admitted["status"]["admission"]["podSetAssignments"]
    # each pod: 1 cpu and 100Mi requested, 500m and 120Mi of overhead
    assert assignment["resourceUsage"] == {"cpu": "3", "memory": "440Mi"}, assignment
    await wait_job(env, "small", is_complete, "complete")

    # 3 pods of 1.5 cpu do not fit 4 cpu; with a 100m overhead they do.
    await env.kube.create(JOBS, _sandboxed("wide", 3))
    waiting = await wait_workload(
        env,
        "wide",
        lambda w: (condition_of(w, "QuotaReserved") or {}).get("reason") == "ExceedsMaxQuota",
        "pending: it cannot fit",
    )
    told = condition_of(waiting, "QuotaReserved") or {}
    assert "current podset request (4500m) > maximum capacity (4)" in told["message"], told
    current = await env.kube.get(RUNTIME_CLASSES, None, "kata")
    current["overhead"]["podFixed"]["cpu"] = "100m"
    await env.kube.replace(RUNTIME_CLASSES, current)
    await wait_job(env, "wide", is_complete, "admitted and complete once the overhead is smaller")
