"""The invariant checker is no vacuous oracle: fed the changes a broken kadmit would commit, it
names each broken rule at the change that broke it."""

from __future__ import annotations

from typing import Any

import yaml

from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.store import Event
from tests.chaos.harness import KUEUE, SETUP, Invariants

Obj = dict[str, Any]


def true(kind: str) -> Obj:
    return {"type": kind, "status": "True"}


def workload(name: str, queue: str, cpu: str, *conditions: str, owner: str = "") -> Obj:
    meta: Obj = {"name": name, "namespace": "default"}
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "kind": "Job", "name": owner}]
    assignment = {"name": "main", "count": 1, "flavors": {"cpu": "cpu"}, "resourceUsage": {"cpu": cpu}}
    admission = {"clusterQueue": queue, "podSetAssignments": [assignment]}
    return {"metadata": meta, "status": {"conditions": [true(c) for c in conditions], "admission": admission}}


def feed(invariants: Invariants, plural: str, obj: Obj, old: Obj | None = None,
         kind: str = "MODIFIED") -> None:
    group = "batch" if plural == "jobs" else KUEUE
    invariants._on_event(Event(kind, invariants.events + 1, (group, plural), obj, old))  # type: ignore[arg-type]


async def checker() -> Invariants:
    async with LocalCluster() as cluster:  # only its store is used
        invariants = Invariants(cluster)
    for doc in yaml.safe_load_all(SETUP):
        if doc and doc["kind"] == "ClusterQueue":
            feed(invariants, "clusterqueues", doc, kind="ADDED")
    return invariants


async def test_quota_beyond_a_queue_and_beyond_its_cohort() -> None:
    invariants = await checker()
    feed(invariants, "workloads", workload("a", "team-a", "4", "QuotaReserved"))
    assert invariants.violations == []  # 3 nominal + 2 borrowable
    feed(invariants, "workloads", workload("b", "team-a", "1500m", "QuotaReserved"))
    assert "team-a holds 5.5 cpu of flavor cpu, limit 5" in invariants.violations[-1]
    feed(invariants, "workloads", workload("b", "team-a", "1500m", "QuotaReserved", "Finished"))
    count = len(invariants.violations)
    feed(invariants, "workloads", workload("c", "team-b", "2500m", "QuotaReserved"))
    assert "cohort chaos holds 6.5 cpu of cpu, capacity 6" in invariants.violations[-1]
    assert len(invariants.violations) == count + 1  # team-b itself is within its 5


async def test_a_queue_reporting_more_than_its_quota() -> None:
    invariants = await checker()
    cq = next(d for d in yaml.safe_load_all(SETUP) if d and d["metadata"]["name"] == "team-b")
    cq["status"] = {"flavorsReservation": [{"name": "cpu", "resources": [{"name": "cpu", "total": "6"}]}]}
    feed(invariants, "clusterqueues", cq)
    assert "team-b reports 6 cpu of cpu reserved, limit 5" in invariants.violations[-1]


async def test_a_job_started_without_an_admitted_unevicted_workload() -> None:
    invariants = await checker()
    suspended = {"metadata": {"name": "j", "namespace": "default", "uid": "u1"}, "spec": {"suspend": True}}
    running = {**suspended, "spec": {"suspend": False}}
    feed(invariants, "workloads", workload("w", "team-a", "1", "QuotaReserved", owner="u1"))
    feed(invariants, "jobs", running, suspended)
    assert "Job default/j started while its Workloads are [['QuotaReserved']]" in invariants.violations[-1]
    evicted = workload("w", "team-a", "1", "QuotaReserved", "Admitted", "Evicted", owner="u1")
    feed(invariants, "workloads", evicted)
    feed(invariants, "jobs", running, suspended)
    assert "Evicted" in invariants.violations[-1]
    count = len(invariants.violations)
    feed(invariants, "workloads", workload("w", "team-a", "1", "QuotaReserved", "Admitted", owner="u1"))
    feed(invariants, "jobs", running, suspended)
    feed(invariants, "jobs", running, running)  # still running: not a start
    assert len(invariants.violations) == count and invariants.starts == 3


async def test_the_end_names_what_is_left() -> None:
    invariants = await checker()
    feed(invariants, "workloads", workload("w", "team-a", "1", "QuotaReserved", "Admitted"))
    problems = invariants.finish()
    assert any("team-a still holds" in p for p in problems), problems
