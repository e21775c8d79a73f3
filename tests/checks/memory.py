"""An in-memory stand-in for a started watch, for the pure decision tests of the built-in checks."""

from __future__ import annotations

from typing import Any

from kadmit.checks.plugin import ClusterView
from kadmit.kube import Client, Resource
from kadmit.kube.informer import Handler, Informer
from kadmit.kube.resources import LIMIT_RANGES

Obj = dict[str, Any]


class MemoryWatch:
    def __init__(self, objects: list[Obj] | None = None) -> None:
        self.objects: dict[tuple[str | None, str], Obj] = {}
        for obj in objects or []:
            self.put(obj)

    def put(self, obj: Obj) -> None:
        meta = obj["metadata"]
        self.objects[(meta.get("namespace"), meta["name"])] = obj

    async def wait_synced(self) -> None:
        return None

    def list(self, namespace: str | None = None) -> list[Obj]:
        return [o for (ns, _), o in self.objects.items() if namespace is None or ns == namespace]

    def get(self, namespace: str | None, name: str) -> Obj | None:
        return self.objects.get((namespace, name))

    def add_handler(self, fn: Handler) -> None:
        return None


def memory_cluster(objects: dict[Resource, list[Obj]]) -> tuple[ClusterView, dict[Resource, MemoryWatch]]:
    """A cluster view over in-memory objects; kinds not given are watched and empty."""
    objects = {LIMIT_RANGES: [], **objects}
    watches: dict[Resource, MemoryWatch] = {kind: MemoryWatch(objs) for kind, objs in objects.items()}
    view = ClusterView(dict[Resource, Informer](watches), Client(None))  # type: ignore[arg-type]
    return view, watches
