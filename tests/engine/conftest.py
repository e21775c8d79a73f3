"""Builders for the Kueue objects the engine tests feed in, written as users write them."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kadmit.engine import COMPILED, Engine
from kadmit.engine.timestamps import format_time

API = "kueue.x-k8s.io/v1beta2"
T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z

interpreted_only = pytest.mark.skipif(
    COMPILED,
    reason="swaps engine functions for reference or counting ones (unittest.mock.patch); compiled "
    "modules call each other directly, so the swap would change nothing and the test would prove nothing",
)
"""For a test that checks the engine against itself with some of its functions patched: it runs
where the engine is interpreted (the test command's editable install), not on a compiled wheel."""


def flavor(
    name: str,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if labels:
        spec["nodeLabels"] = labels
    if taints:
        spec["nodeTaints"] = taints
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def quotas(flavors: dict[str, dict[str, Any]], resources: list[str] | None = None) -> list[dict[str, Any]]:
    """One resource group: ``{"f1": {"cpu": 4}, ...}`` or ``{"f1": {"cpu": (4, bl, ll)}}``."""
    covered = resources or list(next(iter(flavors.values())))
    group: dict[str, Any] = {"coveredResources": covered, "flavors": []}
    for fname, res in flavors.items():
        entries = []
        for rname in covered:
            value = res[rname]
            entry: dict[str, Any] = {"name": rname}
            if isinstance(value, tuple):
                entry["nominalQuota"] = value[0]
                if value[1] is not None:
                    entry["borrowingLimit"] = value[1]
                if len(value) > 2 and value[2] is not None:
                    entry["lendingLimit"] = value[2]
            else:
                entry["nominalQuota"] = value
            entries.append(entry)
        group["flavors"].append({"name": fname, "resources": entries})
    return [group]


def cluster_queue(
    name: str, groups: list[dict[str, Any]], cohort: str | None = None, **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": groups, **spec}
    if cohort:
        body["cohortName"] = cohort
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": body}


def cohort(
    name: str, parent: str | None = None, groups: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if groups:
        spec["resourceGroups"] = groups
    return {"apiVersion": API, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, cq: str, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cq, **spec},
    }


def pod_set(
    count: int = 1, name: str = "main", min_count: int | None = None, **pod_spec: Any
) -> dict[str, Any]:
    requests = pod_spec.pop("requests", {"cpu": "1"})
    spec = {"containers": [{"name": "c", "resources": {"requests": requests}}], **pod_spec}
    out: dict[str, Any] = {"name": name, "count": count, "template": {"spec": spec}}
    if min_count is not None:
        out["minCount"] = min_count
    return out


def workload(
    name: str,
    queue: str = "lq",
    *,
    pod_sets: list[dict[str, Any]] | None = None,
    priority: int | None = None,
    created: float = 0.0,
    namespace: str = "default",
    status: dict[str, Any] | None = None,
    **requests: Any,
) -> dict[str, Any]:
    sets = pod_sets or [pod_set(requests.pop("count", 1), requests=requests or {"cpu": "1"})]
    spec: dict[str, Any] = {"queueName": queue, "podSets": sets}
    if priority is not None:
        spec["priority"] = priority
    obj: dict[str, Any] = {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "creationTimestamp": format_time(T0 + created),
        },
        "spec": spec,
    }
    if status:
        obj["status"] = status
    return obj


def admitted_status(
    cq: str, flavors: dict[str, str], usage: dict[str, str], count: int = 1, at: float = 0.0
) -> dict[str, Any]:
    """The status Kueue writes for a workload holding quota (used to rebuild the engine)."""
    when = format_time(T0 + at)
    return {
        "admission": {
            "clusterQueue": cq,
            "podSetAssignments": [
                {"name": "main", "flavors": flavors, "resourceUsage": usage, "count": count}
            ],
        },
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": "",
                "lastTransitionTime": when,
            },
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "",
                "lastTransitionTime": when,
            },
        ],
    }


def load(*objects: dict[str, Any]) -> Engine:
    engine = Engine()
    for obj in objects:
        engine.upsert(obj)
    return engine


def leave_and_finish(
    engine: Engine, decisions: Any, reserved: list[tuple[str, str]], rng: random.Random
) -> None:
    """After a cycle of a replay: its victims leave at once, and each workload reserved so far
    (``reserved``, to which this cycle's are added) finishes with odds of 0.3 once Admitted."""
    reserved += [r.workload for r in decisions.reservations]
    for preemption in decisions.preemptions:
        engine.release(*preemption.victim)
    for key in list(reserved):
        if rng.random() < 0.3 and engine.status(*key).state == "Admitted":
            engine.finish(*key)
            reserved.remove(key)


def two_flavors_full_of_low_priority_work() -> Engine:
    """Flavors a and b, 2 cpu each, each held by a low-priority workload (low-a, low-b), in a
    ClusterQueue that preempts lower priority and stops its walk where preemption is needed
    (whenCanPreempt: MayStopSearch): a stop at a, not the last flavor, is remembered."""
    engine = load(
        flavor("a"),
        flavor("b"),
        cluster_queue(
            "cq",
            quotas({"a": {"cpu": 2}, "b": {"cpu": 2}}),
            preemption={"withinClusterQueue": "LowerPriority"},
            flavorFungibility={"whenCanPreempt": "MayStopSearch"},
        ),
        local_queue("lq", "cq"),
    )
    for name in ("a", "b"):
        status = admitted_status("cq", {"cpu": name}, {"cpu": "2"})
        engine.upsert(workload(f"low-{name}", cpu="2", priority=0, status=status))
    return engine


def admitted_names(decisions: Any) -> list[str]:
    return [r.workload[1] for r in decisions.reservations]


def pending_by_name(decisions: Any) -> dict[str, tuple[str, str]]:
    return {p.workload[1]: (p.reason, p.message) for p in decisions.pending}


@pytest.fixture
def single_cq() -> Engine:
    """Kueue's single-clusterqueue-setup: 9 cpu / 36Gi on default-flavor."""
    return load(
        flavor("default-flavor"),
        cluster_queue("cluster-queue", quotas({"default-flavor": {"cpu": 9, "memory": "36Gi"}})),
        local_queue("lq", "cluster-queue"),
    )
