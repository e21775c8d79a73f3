"""An in-memory stand-in for a started watch, for the pure decision tests of the built-in checks."""

from __future__ import annotations

from typing import Any

from kadmit.checks.api import Api
from kadmit.checks.kinds import LIMIT_RANGES, Kind
from kadmit.checks.plugin import ClusterView
from kadmit.checks.watch import Watch, WatchHandler

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

    def add_handler(self, fn: WatchHandler) -> None:
        return None


def memory_cluster(objects: dict[Kind, list[Obj]]) -> tuple[ClusterView, dict[Kind, MemoryWatch]]:
    """A cluster view over in-memory objects; kinds not given are watched and empty."""
    objects = {LIMIT_RANGES: [], **objects}
    watches: dict[Kind, MemoryWatch] = {kind: MemoryWatch(objs) for kind, objs in objects.items()}
    view = ClusterView(dict[Kind, Watch](watches), Api(None))  # type: ignore[arg-type]
    return view, watches
