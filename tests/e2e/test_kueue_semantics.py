"""Four of Kueue's scheduling rules through the API on a local cluster (issue 14): a blocked
StrictFIFO head holds back quota it cannot be sure to reclaim, hierarchical reclaim ignores
priority, fair sharing reclaims from a borrowing sibling, and requeuing by creation time."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from kadmit.controller.config import RequeuingStrategy, WaitForPodsReady
from kadmit.kube.resources import JOBS, LOCAL_QUEUES, WORKLOADS
from tests.e2e.conftest import Env, eventually, fast_config
from tests.e2e.helpers import (
    condition,
    condition_of,
    is_admitted,
    is_complete,
    is_running,
    job,
    wait_job,
    wait_workload,
    workload_of,
)

API = "kueue.x-k8s.io/v1beta2"
Obj = dict[str, Any]


def _flavor(name: str = "cpu", pool: str = "cpu") -> Obj:
    return {
        "apiVersion": API,
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": {"kadmit.dev/pool": pool}},
    }


def _cq(name: str, cpu: int, *, cohort: str | None = None, flavor: str = "cpu", **spec: Any) -> Obj:
    body: Obj = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": flavor,
                        "resources": [
                            {"name": "cpu", "nominalQuota": cpu},
                            {"name": "memory", "nominalQuota": "64Gi"},
                        ],
                    }
                ],
            }
        ],
        **spec,
    }
    if cohort:
        body["cohortName"] = cohort
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": body}


def _lq(name: str, cq: str, **spec: Any) -> Obj:
    return {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"clusterQueue": cq, **spec},
    }


def _priority(name: str, value: int) -> Obj:
    return {"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}


async def _admitted_in(env: Env, cq: str) -> list[str]:
    items = (await env.kube.list(WORKLOADS, "default"))["items"]
    return sorted(
        w["metadata"]["name"]
        for w in items
        if is_admitted(w) and (w["status"].get("admission") or {}).get("clusterQueue") == cq
    )


async def _pending(env: Env, job_name: str) -> Obj:
    return await wait_workload(
        env, job_name, lambda w: condition(w, "QuotaReserved") == "False", "QuotaReserved=False"
    )


@pytest.mark.parametrize("reclaim", ["LowerPriority", "Any"])
async def test_blocked_strict_fifo_head_holds_back_what_it_cannot_be_sure_to_reclaim(
    env: Env, reclaim: str
) -> None:
    await env.start_manager()
    await env.applier.apply_all(
        [
            _flavor(),
            _priority("foundation", 1000),
            _priority("best-effort", 0),
            _cq(
                "foundation",
                2,
                cohort="cohort",
                queueingStrategy="StrictFIFO",
                preemption={"reclaimWithinCohort": reclaim},
            ),
            _cq("best-effort", 0, cohort="cohort"),
            _lq("foundation", "foundation"),
            _lq("best-effort", "best-effort"),
        ]
    )
    run = dict(cpu="1", parallelism=1)
    await env.kube.create(
        JOBS, job("f1", runtime="8s", queue="foundation", priority_class="foundation", **run)
    )
    await wait_job(env, "f1", is_running, "admitted at once")
    await env.kube.create(
        JOBS,
        job("f2", cpu="1", parallelism=2, runtime="30s", queue="foundation", priority_class="foundation"),
    )
    await _pending(env, "f2")
    for name in ("b1", "b2"):
        await env.kube.create(
            JOBS, job(name, runtime="60s", queue="best-effort", priority_class="best-effort", **run)
        )
    if reclaim == "LowerPriority":
        # Neither may borrow foundation's idle cpu: f2 could not be sure to get it back.
        await _pending(env, "b1")
        await _pending(env, "b2")
        assert (await env.kube.get(JOBS, "default", "f1"))["spec"]["suspend"] is False  # f1 still runs
        await wait_job(env, "f1", is_complete, "complete", within=30)
        await wait_job(env, "f2", is_running, "admitted once f1 is done")
        assert await _admitted_in(env, "best-effort") == []
        return
    # With Any, b1 borrows until f2 can be admitted, then f2 reclaims it.
    await eventually(lambda: _admitted_in(env, "best-effort"), what="one best-effort workload admitted")
    borrowed = await _admitted_in(env, "best-effort")
    assert len(borrowed) == 1, borrowed
    await wait_job(env, "f1", is_complete, "complete", within=30)
    await wait_job(env, "f2", is_running, "admitted after reclaiming")
    victims = [
        w for w in (await env.kube.list(WORKLOADS, "default"))["items"] if condition(w, "Preempted") == "True"
    ]
    assert [condition_of(w, "Preempted")["reason"] for w in victims] == ["InCohortReclamation"]  # type: ignore[index]


async def test_hierarchical_reclaim_preempts_a_higher_priority_borrower(env: Env) -> None:
    await env.start_manager()
    preemption = {"reclaimWithinCohort": "Any"}
    await env.applier.apply_all(
        [
            _flavor(),
            _priority("high", 100),
            _priority("mid", 50),
            {"apiVersion": API, "kind": "Cohort", "metadata": {"name": "root"}, "spec": {}},
            {
                "apiVersion": API,
                "kind": "Cohort",
                "metadata": {"name": "guaranteed"},
                "spec": {
                    "parentName": "root",
                    "resourceGroups": _cq("x", 3)["spec"]["resourceGroups"],
                },
            },
            _cq("guaranteed", 0, cohort="guaranteed", preemption=preemption),
            _cq("best-effort", 0, cohort="root", preemption=preemption),
            _lq("guaranteed", "guaranteed"),
            _lq("best-effort", "best-effort"),
        ]
    )
    await env.kube.create(
        JOBS, job("high", parallelism=3, runtime="60s", queue="best-effort", priority_class="high")
    )
    await wait_job(env, "high", is_running, "admitted by borrowing the guaranteed cohort's quota")
    await env.kube.create(
        JOBS, job("mid", parallelism=3, runtime="1s", queue="guaranteed", priority_class="mid")
    )
    victim = await wait_workload(env, "high", lambda w: condition(w, "Preempted") == "True", "preempted")
    preempted = condition_of(victim, "Preempted")
    assert preempted is not None and preempted["reason"] == "InCohortReclamation", preempted
    assert (
        "preemptor path: /root/guaranteed/guaranteed; preemptee path: /root/best-effort"
        in preempted["message"]
    )
    await wait_job(env, "mid", is_running, "admitted once the borrower left")


@pytest.mark.parametrize(("c_weight", "expected"), [(None, (3, 3)), ("2", (2, 4))])
async def test_fair_sharing_reclaims_from_a_borrowing_sibling(
    env: Env, c_weight: str | None, expected: tuple[int, int]
) -> None:
    await env.start_manager(
        fast_config(fair_sharing_strategies=("LessThanOrEqualToFinalShare", "LessThanInitialShare"))
    )
    preemption = {"reclaimWithinCohort": "Any"}
    c_spec: Obj = {"preemption": preemption}
    if c_weight:
        c_spec["fairSharing"] = {"weight": c_weight}
    await env.applier.apply_all(
        [
            _flavor(),
            _cq("a", 6, cohort="team"),
            _cq("b", 0, cohort="team", preemption=preemption),
            _cq("c", 0, cohort="team", **c_spec),
            _lq("b", "b"),
            _lq("c", "c"),
        ]
    )
    for i in range(6):
        await env.kube.create(JOBS, job(f"b{i}", parallelism=1, runtime="120s", queue="b"))
    await eventually(lambda: _count_is(env, "b", 6), what="b borrows all of a's 6 cpus")
    for i in range(6):
        await env.kube.create(JOBS, job(f"c{i}", parallelism=1, runtime="120s", queue="c"))

    async def settled() -> tuple[int, int] | None:
        shares = (len(await _admitted_in(env, "b")), len(await _admitted_in(env, "c")))
        return shares if shares == expected else None

    await eventually(settled, within=30, what=f"b / c admitted {expected}")
    await asyncio.sleep(1)  # and it stays so
    assert (len(await _admitted_in(env, "b")), len(await _admitted_in(env, "c"))) == expected


async def _count_is(env: Env, cq: str, count: int) -> bool:
    return len(await _admitted_in(env, cq)) == count


# Pods on this flavor never get scheduled (no such nodes): admitted, then evicted by the timeout.
@pytest.mark.parametrize(("timestamp", "first"), [("Creation", "older"), ("Eviction", "newer")])
async def test_requeuing_timestamp_orders_the_workloads_evicted_by_the_pods_ready_timeout(
    env: Env, timestamp: str, first: str
) -> None:
    wfpr = WaitForPodsReady(
        timeout=1.0,
        recovery_timeout=1.0,
        requeuing_strategy=RequeuingStrategy(
            timestamp=timestamp, backoff_base_seconds=1, backoff_max_seconds=1
        ),
    )
    await env.start_manager(dataclasses.replace(fast_config(), wait_for_pods_ready=wfpr))
    await env.applier.apply_all(
        [
            _flavor("ghost", pool="ghost"),
            _cq("ghost", 1, flavor="ghost", queueingStrategy="StrictFIFO"),
            _lq("ghost", "ghost"),
        ]
    )
    await env.kube.create(JOBS, job("older", parallelism=1, runtime="1s", queue="ghost"))
    await wait_workload(env, "older", is_admitted, "admitted")
    await env.kube.create(JOBS, job("newer", parallelism=1, runtime="1s", queue="ghost"))
    await _pending(env, "newer")
    # Hold the queue: "older" is evicted by the timeout and requeued, "newer" waits beside it.
    await env.kube.patch(LOCAL_QUEUES, "default", "ghost", {"spec": {"stopPolicy": "Hold"}})

    def timed_out(wl: Obj) -> bool:
        evicted = condition_of(wl, "Evicted")
        return evicted is not None and evicted["reason"] == "PodsReadyTimeout" and not is_admitted(wl)

    await wait_workload(env, "older", timed_out, "evicted for PodsReadyTimeout")
    await asyncio.sleep(2.5)  # past the requeue backoff: both wait for the queue only
    assert not is_admitted(await workload_of(env, "newer") or {})
    await env.kube.patch(LOCAL_QUEUES, "default", "ghost", {"spec": {"stopPolicy": "None"}})
    await wait_workload(env, first, is_admitted, f"admitted first (ordered by {timestamp})")
    other = "newer" if first == "older" else "older"
    assert not is_admitted(await workload_of(env, other) or {})
