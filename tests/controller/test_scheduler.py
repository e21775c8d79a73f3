"""Assume, then write: a reservation whose write fails is forgotten, so quota is never promised twice."""

from __future__ import annotations

import copy
from typing import Any

from kadmit.controller.scheduler import Scheduler
from kadmit.engine import Engine
from kadmit.kube import ApiError, Resource

Obj = dict[str, Any]
NOW = 1_700_000_000.0


class Store:
    """The API server's copy of the Workloads, with resourceVersions and injectable conflicts."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], Obj] = {}
        self.conflicts: set[str] = set()
        self.writes = 0

    def put(self, obj: Obj) -> None:
        obj["metadata"]["resourceVersion"] = str(len(self.objects) + 100)
        self.objects[(obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj

    # the Kube surface the scheduler uses
    async def replace(self, resource: Resource, obj: Obj, *, subresource: str | None = None) -> Obj:
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        if key[1] in self.conflicts:
            self.conflicts.discard(key[1])
            raise ApiError(409, "Conflict", "the object has been modified")
        stored = self.objects[key]
        if stored["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "stale resourceVersion")
        new = copy.deepcopy(obj)
        new["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1)
        self.objects[key] = new
        self.writes += 1
        return copy.deepcopy(new)

    async def get(self, resource: Resource, namespace: str | None, name: str) -> Obj:
        return copy.deepcopy(self.objects[(namespace or "", name)])

    # the Informer surface
    def get_cached(self, namespace: str | None, name: str) -> Obj | None:
        found = self.objects.get((namespace or "", name))
        return copy.deepcopy(found) if found else None


class Cache:
    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, namespace: str | None, name: str) -> Obj | None:
        return self.store.get_cached(namespace, name)


def workload(name: str, created: str) -> Obj:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ns", "uid": name, "creationTimestamp": created},
        "spec": {
            "queueName": "lq",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]}
                    },
                }
            ],
        },
    }


def setup() -> tuple[Engine, Store, Scheduler]:
    engine = Engine()
    engine.upsert(
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    )
    engine.upsert(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "4"}]}],
                    }
                ],
            },
        }
    )
    engine.upsert(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": "ns"},
            "spec": {"clusterQueue": "cq"},
        }
    )
    store = Store()
    for wl in (workload("a", "2026-01-01T00:00:00Z"), workload("b", "2026-01-01T00:00:01Z")):
        store.put(wl)
        engine.upsert_workload(copy.deepcopy(wl))
    scheduler = Scheduler(engine, store, Cache(store), clock=lambda: NOW)  # type: ignore[arg-type]
    return engine, store, scheduler


def reserved(store: Store) -> list[str]:
    return sorted(n for (_, n), o in store.objects.items() if (o.get("status") or {}).get("admission"))


async def test_a_failed_reservation_write_is_forgotten_and_retried() -> None:
    engine, store, scheduler = setup()
    store.conflicts.add("a")
    decisions = await scheduler.cycle()
    assert [r.workload for r in decisions.reservations] == [("ns", "a")]
    assert reserved(store) == []
    assert engine.reservation_count() == 0  # the assumption was dropped
    decisions = await scheduler.cycle()
    assert [r.workload for r in decisions.reservations] == [("ns", "a")]
    assert reserved(store) == ["a"]
    assert engine.reservation_count() == 1
    await scheduler.cycle()
    assert reserved(store) == ["a"]  # b does not fit: never two reservations for 4 CPUs
    b = store.objects[("ns", "b")]
    [quota] = [c for c in b["status"]["conditions"] if c["type"] == "QuotaReserved"]
    assert quota["status"] == "False"
    assert "insufficient unused quota" in quota["message"]


async def test_a_stale_cache_copy_never_gets_a_reservation() -> None:
    engine, store, scheduler = setup()
    # Someone else changed "a" after the engine saw it: the write carries the old resourceVersion.
    stale = copy.deepcopy(store.objects[("ns", "a")])
    store.objects[("ns", "a")]["metadata"]["resourceVersion"] = "999"

    class StaleCache(Cache):
        def get(self, namespace: str | None, name: str) -> Obj | None:
            return copy.deepcopy(stale) if name == "a" else super().get(namespace, name)

    scheduler.workloads = StaleCache(store)  # type: ignore[assignment]
    await scheduler.cycle()
    assert reserved(store) == []
    assert engine.reservation_count() == 0


def test_a_cleared_reservation_drops_the_admission_but_never_an_admitted_one() -> None:
    from kadmit.controller.scheduler import _cleared_writer

    conditions = [
        {
            "type": "QuotaReserved",
            "status": "False",
            "reason": "Suspended",
            "message": "ClusterQueue cq is stopped",
        }
    ]
    status: Obj = {
        "admission": {"clusterQueue": "cq"},
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": ""}],
    }
    assert _cleared_writer(conditions, NOW)(status)
    assert "admission" not in status
    assert status["conditions"][0]["reason"] == "Suspended"
    admitted: Obj = {
        "admission": {"clusterQueue": "cq"},
        "conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted", "message": ""}],
    }
    assert not _cleared_writer(conditions, NOW)(admitted)
    assert "admission" in admitted
