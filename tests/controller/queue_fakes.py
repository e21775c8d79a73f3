"""A fake API server and informers for the queue status loop: events in order, writes echoed back.

:class:`FakeApi` keeps the objects with resourceVersions, feeds the engine as the manager does,
and delivers every change to the informers' handlers as a watch would. Status PUTs may be slowed
down or failed per object; each write that lands comes back to its informer as a MODIFIED event
a moment later, as a watch event would.
"""

from __future__ import annotations

import asyncio
import collections
import copy
from collections.abc import Callable
from typing import Any

from kadmit.engine import Engine
from kadmit.kube import ADDED, DELETED, MODIFIED, Conflict, NotFound, Resource, ServerError

Obj = dict[str, Any]
API = "kueue.x-k8s.io/v1beta2"
WHEN = "2026-01-01T00:00:00Z"
KINDS = {
    "workloads": "Workload",
    "clusterqueues": "ClusterQueue",
    "localqueues": "LocalQueue",
    "cohorts": "Cohort",
    "resourceflavors": "ResourceFlavor",
    "admissionchecks": "AdmissionCheck",
}


class FakeInformer:
    """The Informer surface the status loop reads."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str | None, str], Obj] = {}
        self.handlers: list[Callable[[str, Obj, Obj | None], Any]] = []

    def get(self, namespace: str | None, name: str) -> Obj | None:
        return self.objects.get((namespace, name))

    def list(self) -> list[Obj]:
        return list(self.objects.values())

    def add_handler(self, fn: Callable[[str, Obj, Obj | None], Any]) -> None:
        self.handlers.append(fn)

    def deliver(self, obj: Obj, *, deleted: bool = False) -> None:
        key = (obj["metadata"].get("namespace"), obj["metadata"]["name"])
        old = self.objects.get(key)
        if deleted:
            self.objects.pop(key, None)
            kind = DELETED
        else:
            self.objects[key] = obj
            kind = ADDED if old is None else MODIFIED
        for handler in self.handlers:
            handler(kind, obj, old)


class FakeInformers:
    def __init__(self) -> None:
        self.informers: dict[str, FakeInformer] = {}

    def get(self, resource: Resource) -> FakeInformer:
        return self.informers.setdefault(resource.plural, FakeInformer())


class FakeApi:
    def __init__(self, informers: FakeInformers, engine: Engine) -> None:
        self.informers = informers
        self.engine = engine
        self.objects: dict[tuple[str, str | None, str], Obj] = {}
        self.version = 100
        self.writes: collections.Counter[tuple[str, str | None, str]] = collections.Counter()
        self.slow: dict[str, asyncio.Event] = {}  # name → a PUT of it waits until this is set
        self.failures: collections.Counter[str] = collections.Counter()  # name → PUTs to fail with 500
        self.echo_delay = 0.001
        self._echoes: list[tuple[Resource, Obj]] = []  # written, not delivered yet: in order

    def status(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        return (self.objects.get((resource.plural, namespace, name)) or {}).get("status") or {}

    def apply(self, resource: Resource, obj: Obj) -> Obj:
        """Create or change an object, as a client of the API would; informers hear of it at once
        (after the writes before it: a watch delivers in order)."""
        self._echo()
        obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        key = (resource.plural, meta.get("namespace"), meta["name"])
        stored = self.objects.get(key)
        if stored is not None and "status" not in obj and "status" in stored:
            obj["status"] = copy.deepcopy(stored["status"])
        self.version += 1
        meta["resourceVersion"] = str(self.version)
        self.objects[key] = obj
        self._deliver(resource, obj)
        return obj

    def delete(self, resource: Resource, namespace: str | None, name: str) -> None:
        self._echo()
        obj = self.objects.pop((resource.plural, namespace, name))
        kind = KINDS[resource.plural]
        if kind == "Workload":
            self.engine.delete_workload(namespace or "", name)
        elif kind == "LocalQueue":
            self.engine.delete_local_queue(namespace or "", name)
        else:
            getattr(self.engine, f"delete_{_snake(kind)}")(name)
        self.informers.get(resource).deliver(copy.deepcopy(obj), deleted=True)

    def _echo(self) -> None:
        """Deliver the writes not delivered yet, oldest first."""
        echoes, self._echoes = self._echoes, []
        for resource, obj in echoes:
            self._deliver(resource, obj)

    def _deliver(self, resource: Resource, obj: Obj) -> None:
        fed = copy.deepcopy(obj)
        fed.setdefault("kind", KINDS[resource.plural])
        self.engine.upsert(fed)  # as the manager's engine feed does
        self.informers.get(resource).deliver(copy.deepcopy(obj))

    # -- the Client surface the status loop uses

    async def replace(self, resource: Resource, obj: Obj, *, subresource: str | None = None) -> Obj:
        name = obj["metadata"]["name"]
        gate = self.slow.get(name)
        if gate is not None:
            await gate.wait()
        await asyncio.sleep(0)
        if self.failures[name] > 0:
            self.failures[name] -= 1
            raise ServerError(500, "InternalError", "injected failure")
        key = (resource.plural, obj["metadata"].get("namespace"), name)
        stored = self.objects.get(key)
        if stored is None:
            raise NotFound(404, "NotFound", f"{key} not found")
        if stored["metadata"]["resourceVersion"] != obj["metadata"].get("resourceVersion"):
            raise Conflict(409, "Conflict", "the object has been modified")
        assert subresource == "status"
        new = copy.deepcopy(stored)
        new["status"] = copy.deepcopy(obj.get("status") or {})
        self.version += 1
        new["metadata"]["resourceVersion"] = str(self.version)
        self.objects[key] = new
        self.writes[key] += 1
        self._echoes.append((resource, copy.deepcopy(new)))
        asyncio.get_running_loop().call_later(self.echo_delay, self._echo)
        return copy.deepcopy(new)

    async def get(self, resource: Resource, namespace: str | None, name: str) -> Obj:
        stored = self.objects.get((resource.plural, namespace, name))
        if stored is None:
            raise NotFound(404, "NotFound", f"{resource.plural} {namespace}/{name} not found")
        return copy.deepcopy(stored)


def _snake(kind: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in kind).lstrip("_")


# -- objects


def flavor(name: str = "f") -> Obj:
    return {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {}}


def cluster_queue(name: str, cpu: str = "100", cohort: str | None = None, **spec: Any) -> Obj:
    body: Obj = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
            }
        ],
        **spec,
    }
    if cohort:
        body["cohortName"] = cohort
    return {
        "apiVersion": API,
        "kind": "ClusterQueue",
        "metadata": {"name": name, "generation": 1},
        "spec": body,
    }


def local_queue(name: str, cq: str, namespace: str = "ns") -> Obj:
    return {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace, "generation": 1},
        "spec": {"clusterQueue": cq},
    }


def cohort(name: str, parent: str | None = None) -> Obj:
    return {
        "apiVersion": API,
        "kind": "Cohort",
        "metadata": {"name": name},
        "spec": {"parentName": parent} if parent else {},
    }


def workload(name: str, queue: str, cpu: str = "1", namespace: str = "ns") -> Obj:
    return {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": name,
            "creationTimestamp": WHEN,
            "generation": 1,
        },
        "spec": {
            "queueName": queue,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
                    },
                }
            ],
        },
    }


def condition(kind: str, reason: str, status: str = "True") -> Obj:
    return {"type": kind, "status": status, "reason": reason, "message": "", "lastTransitionTime": WHEN}


def admitted(wl: Obj, cq: str) -> Obj:
    """``wl`` holding quota in ``cq`` and Admitted, as the scheduler writes it."""
    wl = copy.deepcopy(wl)
    cpu = wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"]
    wl["status"] = {
        "admission": {
            "clusterQueue": cq,
            "podSetAssignments": [
                {"name": "main", "count": 1, "flavors": {"cpu": "f"}, "resourceUsage": {"cpu": cpu}}
            ],
        },
        "conditions": [condition("QuotaReserved", "QuotaReserved"), condition("Admitted", "Admitted")],
    }
    return wl


def finished(wl: Obj) -> Obj:
    wl = copy.deepcopy(wl)
    wl.setdefault("status", {}).setdefault("conditions", []).append(condition("Finished", "Succeeded"))
    return wl
